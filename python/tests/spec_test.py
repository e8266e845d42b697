"""Specs from Python: a dict, a spec file or a SweepSpec, packed by
ranksweep.spec into the request and read, checked and costed by a real
ranksweepd with the parser of `ranksweep submit -f` (Client.validate and
Client.submit). The packing is checked alone first, then against the
coordinator, which runs on loopback on a temporary database (no worker).
RANKSWEEP_BIN_DIR names the directory of ranksweepd.
"""

import json
import os
import pathlib
import tempfile
import unittest

import grpc

import ranksweep
from ranksweep import RanksweepError, SpecError, Validation
from ranksweep import spec as spec_lib
from ranksweep.v1 import ranksweep_pb2 as pb

from cluster import Cluster  # this directory is on sys.path

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEMO_YAML = os.path.join(REPO, "examples", "demo.yaml")

# DEMO_YAML as a dict: a witness family, a kernel head at 7 ranks
# and softmax, 3 seeds: 7 x 3 + 3 = 24 cells.
DEMO = {
    "name": "demo-witness",
    "dataset": {"kind": "witness", "m": 24, "seq_len": 3, "code_weight": 8,
                "max_overlap": 4, "num_queries": 12},
    "heads": [{"kind": "kernel", "feature_map": "elu1"}, {"kind": "softmax"}],
    "ranks": [1, 2, 4, 8, 16, 32, 64],
    "seed_count": 3,
    "train": {"lr": 0.02, "max_steps": 3000, "eval_every": 50, "early_stop_evals": 1},
}
DEMO_CELLS = 24


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
        return path


class SpecInputTest(TempDirTest):
    """What spec_input() makes of each kind of spec, without a server."""

    def test_a_dict_is_sent_as_its_json(self):
        got = spec_lib.spec_input(DEMO)
        self.assertIsInstance(got, pb.SpecText)
        self.assertEqual((got.format, got.source), ("json", "<dict>"))
        self.assertEqual(json.loads(got.text), DEMO)
        # Any Mapping, and other libraries' numbers (numpy's int64), as JSON.
        import collections
        import numpy as np
        got = spec_lib.spec_input(collections.OrderedDict(
            name="n", ranks=[np.int64(2)], train=collections.OrderedDict(lr=np.float64(0.5))))
        self.assertEqual(json.loads(got.text), {"name": "n", "ranks": [2],
                                                "train": {"lr": 0.5}})

    def test_a_dict_that_is_not_json_is_refused_before_sending(self):
        for spec, message in (
                ({"name": "x", "ranks": {1, 2}},
                 "<dict>: not JSON: Object of type set is not JSON serializable"),
                ({"train": {"lr": float("nan")}},
                 "<dict>: not JSON: Out of range float values are not JSON compliant")):
            with self.assertRaises(SpecError) as ctx:
                spec_lib.spec_input(spec)
            self.assertEqual(ctx.exception.message, message)
            self.assertEqual(ctx.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIsNone(ctx.exception.call)
            self.assertIsInstance(ctx.exception, RanksweepError)

    def test_a_file_is_sent_as_its_text_with_the_format_of_its_extension(self):
        text = "name: x\n"
        for name, fmt in (("s.json", "json"), ("s.yaml", "yaml"), ("s.YML", "yaml"),
                          ("s.txt", ""), ("spec", "")):
            path = self.write(name, text)
            got = spec_lib.spec_input(path)
            self.assertEqual((got.text, got.format, got.source), (text, fmt, path), name)
        got = spec_lib.spec_input(pathlib.Path(path))
        self.assertEqual(got.source, path)
        # A path longer than the coordinator takes as a source keeps its end.
        deep = os.path.join(self.dir.name, *(["d" * 60] * 5))
        os.makedirs(deep)
        path = self.write(os.path.join(deep, "s.yaml"), text)
        got = spec_lib.spec_input(path)
        self.assertEqual(len(got.source), 256)
        self.assertEqual(got.source, "..." + path[-253:])

    def test_other_inputs(self):
        p = pb.SweepSpec(name="as-is")
        self.assertIs(spec_lib.spec_input(p), p)
        request = pb.ValidateSweepRequest()
        spec_lib.fill_request(request, p)
        self.assertEqual((request.WhichOneof("input"), request.spec.name), ("spec", "as-is"))
        request = pb.SubmitSweepRequest()
        spec_lib.fill_request(request, {"name": "d"})
        self.assertEqual((request.WhichOneof("input"), request.spec_text.text),
                         ("spec_text", '{"name": "d"}'))
        with self.assertRaises(FileNotFoundError):
            spec_lib.spec_input(os.path.join(self.dir.name, "missing.yaml"))
        with self.assertRaises(TypeError):
            spec_lib.spec_input(42)
        path = self.write("utf8.yaml", b"name: x\nheads: \xff\n")
        with self.assertRaises(SpecError) as ctx:
            spec_lib.spec_input(path)
        self.assertEqual(ctx.exception.message, f"{path}:2:8: the file is not valid UTF-8")


class CoordinatorTest(TempDirTest):
    """A ranksweepd of the class's own on a fresh database."""

    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()
        try:
            cls.cluster.start(worker=False)
            cls.client = ranksweep.Client(addr=cls.cluster.addr)
        except BaseException:
            cls.cluster.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.cluster.stop()

    def assertRefused(self, call, spec, message):
        """call(spec) raises SpecError with exactly `message`; returns it."""
        with self.assertRaises(SpecError) as ctx:
            getattr(self.client, call)(spec)
        self.assertEqual(ctx.exception.message, message)
        self.assertEqual(ctx.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(ctx.exception.call, call)
        return ctx.exception


class ValidateTest(CoordinatorTest):
    """Client.validate(); no test of this class stores a sweep."""

    def test_validate_returns_the_resolved_spec_and_its_cost(self):
        v = self.client.validate(DEMO)
        self.assertIsInstance(v, Validation)
        self.assertEqual((v.cells, v.recipes), (DEMO_CELLS, 1))
        self.assertEqual(v.spec["name"], "demo-witness")
        self.assertEqual(v.spec["ranks"], DEMO["ranks"])
        # The defaults are filled in, enums by name.
        self.assertEqual(v.spec["train"]["lr"], 0.02)
        self.assertEqual((v.spec["train"]["beta1"], v.spec["train"]["beta2"]), (0.9, 0.999))
        self.assertEqual((v.spec["train"]["batch_size"], v.spec["train"]["loss"]), (0, "mse"))
        self.assertEqual(v.spec["heads"][1]["kind"], "softmax")
        self.assertEqual((v.spec["mode"], v.spec["reuse_results"]), ("grid", True))
        self.assertEqual(v.spec_proto.name, "demo-witness")
        self.assertEqual(v.spec_proto.train.beta1, 0.9)
        self.assertEqual(list(v.spec_proto.ranks), DEMO["ranks"])
        # No test split for a witness family; the largest task is the
        # highest rank with every seed.
        self.assertEqual((v.train_sequences, v.test_sequences), (276, 0))
        self.assertGreater(v.task_memory_bytes, 0)
        self.assertEqual(v.largest_task, "kernel/elu1 at rank 64, 3 seeds")
        self.assertEqual(v.warnings, [])
        # The spec the coordinator returns reads back to itself.
        self.assertEqual(self.client.validate(v.spec).spec, v.spec)
        self.assertEqual(self.client.validate(v.spec_proto).spec, v.spec)

    def test_a_file_and_its_dict_are_the_same_spec(self):
        want = self.client.validate(DEMO)
        with open(DEMO_YAML) as f:
            text = f.read()
        for path in (DEMO_YAML, pathlib.Path(DEMO_YAML),
                     self.write("demo.yml", text),
                     self.write("demo.json", json.dumps(DEMO)),
                     self.write("demo", json.dumps(DEMO))):  # '{' first: JSON
            got = self.client.validate(path)
            self.assertEqual(got.spec, want.spec, path)
            self.assertEqual(got.spec_proto, want.spec_proto, path)
            self.assertEqual(got.cells, DEMO_CELLS)

    def test_yaml_is_read_under_the_core_schema_by_the_coordinator(self):
        # 3e-3 is a number under YAML 1.2 (PyYAML's 1.1 reads a string).
        with open(DEMO_YAML) as f:
            text = f.read()
        self.assertIn("  lr: 0.02\n", text)
        self.assertIn("ranks: [1, 2, 4, 8, 16, 32, 64]\n", text)
        text = text.replace("  lr: 0.02\n", "  lr: 3e-3\n  weight_decay: .5\n").replace(
            "ranks: [1, 2, 4, 8, 16, 32, 64]\n", "ranks: [+2, 0x4]\n")
        v = self.client.validate(self.write("core.yaml", text))
        self.assertEqual((v.spec["train"]["lr"], v.spec["train"]["weight_decay"]), (0.003, 0.5))
        self.assertEqual(v.spec["ranks"], [2, 4])

    def test_a_list_where_a_value_stood_is_a_recipe_axis(self):
        v = self.client.validate(dict(DEMO, train=dict(DEMO["train"], lr=[0.01, 0.003])))
        self.assertEqual((v.recipes, v.cells), (2, 2 * DEMO_CELLS))
        self.assertEqual(v.spec["train"]["lr"], [0.01, 0.003])
        self.assertEqual([(a.name, list(a.values)) for a in v.spec_proto.axes],
                         [("lr", [0.01, 0.003])])
        # Axes cross, in the coordinator's order whatever the dict's.
        v = self.client.validate(dict(DEMO, train=dict(DEMO["train"], max_steps=[100, 200, 300],
                                                       lr=[0.01, 0.003])))
        self.assertEqual((v.recipes, v.cells), (6, 6 * DEMO_CELLS))
        self.assertEqual([a.name for a in v.spec_proto.axes], ["lr", "max_steps"])
        self.assertEqual(v.spec["train"]["max_steps"], [100, 200, 300])

    def test_warnings_are_the_cli_s(self):
        v = self.client.validate(dict(DEMO, train=dict(DEMO["train"], loss="ce")))
        self.assertEqual(len(v.warnings), 1, v.warnings)
        self.assertTrue(v.warnings[0].startswith(
            "train.loss ce: kernel/elu1 will be judged by the argmax of m+1 logits"),
            v.warnings[0])

    def test_a_pool_dataset_has_its_sizes(self):
        v = self.client.validate({
            "name": "pool", "dataset": {"kind": "pool", "m": 6, "seq_len": 3, "pool_size": 40,
                                        "train_size": 64, "test_size": 32},
            "heads": [{"kind": "kernel"}], "ranks": [4], "seed_count": 2})
        self.assertEqual((v.train_sequences, v.test_sequences, v.cells), (64, 32, 2))
        self.assertEqual(v.largest_task, "kernel/elu1 at rank 4, 2 seeds")

    def test_errors_are_the_coordinator_s(self):
        # Ranges: the validator's words, as `ranksweep submit` prints them.
        self.assertRefused("validate", dict(DEMO, dataset=dict(DEMO["dataset"], m=0)),
                           "dataset.m must be in 1..64, got 0")
        # Parsing: unknown fields and types, named by path, after the source.
        self.assertRefused("validate", dict(DEMO, train={"lrr": 0.1}),
                           '<dict>: unknown field "train.lrr"')
        self.assertRefused("validate", dict(DEMO, dataset={"m": 2.5}),
                           "<dict>: dataset.m must be an integer, got 2.5")
        self.assertRefused("validate", dict(DEMO, train={"lr": []}),
                           "<dict>: train.lr must be a number or a non-empty list of numbers, "
                           "got []")
        # A YAML file: the key's line and column.
        path = self.write("bad.yaml", "name: x\ndataset:\n  kind: witness\n  mm: 3\n")
        self.assertRefused("validate", path, f'{path}:4:3: unknown field "dataset.mm"')
        path = self.write("dup.yaml", "name: x\nseed_count: 2\nname: y\n")
        self.assertRefused("validate", path, f'{path}:3:1: duplicate key "name"')
        # A JSON file: its name.
        path = self.write("bad.json", '{"name": "x", "dataset": {"mm": 3}}')
        self.assertRefused("validate", path, f'{path}: unknown field "dataset.mm"')
        # The proto too goes through the coordinator's validation.
        self.assertRefused("validate", pb.SweepSpec(name="p", ranks=[1], seed_count=1,
                                                    heads=[pb.HeadSpec()],
                                                    dataset=pb.DatasetSpec(m=0)),
                           "dataset.m must be in 1..64, got 0")

    def test_syntax_errors_name_the_file_and_line(self):
        path = self.write("syntax.yaml", "name: x\ntrain: {lr: 0.1\nranks: [1]\n")
        self.assertRefused("validate", path, f"{path}:3:6: end of map flow not found")
        self.assertRefused("submit", path, f"{path}:3:6: end of map flow not found")
        path = self.write("syntax.json", '{"name": "x",\n "ranks": [1,]}')
        with self.assertRaises(SpecError) as ctx:
            self.client.validate(path)
        self.assertTrue(ctx.exception.message.startswith(
            f"{path}: JSON syntax error at line 2, column "), ctx.exception.message)

    def test_validate_stores_nothing(self):
        self.client.validate(DEMO)
        self.client.validate(dict(DEMO, train={"lr": [0.1, 0.2]}))
        with self.assertRaises(SpecError):
            self.client.validate(dict(DEMO, dataset=dict(DEMO["dataset"], m=0)))
        self.assertEqual(len(self.client.list(include_archived=True)), 0)
        reply = self.client._stub.ListSweeps(pb.ListSweepsRequest())
        self.assertEqual(len(reply.sweeps), 0)


class SubmitTest(CoordinatorTest):
    """Client.submit() and Client.spec(), through the same parser."""

    def test_submit_a_dict_and_read_its_spec_back(self):
        sweep = self.client.submit(dict(DEMO, name="py-round-trip", ranks=[2, 8]))
        got = self.client.spec(sweep)
        self.assertEqual((got["name"], got["ranks"]), ("py-round-trip", [2, 8]))
        # The stored spec is the one validate() shows, and reads back to itself.
        self.assertEqual(got, self.client.validate(dict(DEMO, name="py-round-trip",
                                                        ranks=[2, 8])).spec)
        again = self.client.submit(got)
        self.assertEqual(self.client.spec(again), got)
        self.assertEqual(self.client.spec_proto(sweep).name, "py-round-trip")
        self.assertEqual(self.client.status(sweep)["total"], 2 * 3 + 3)

    def test_submit_a_file_and_a_proto(self):
        path = self.write("axes.yaml", "name: py-axes\ndataset: {kind: witness, m: 8, seq_len: 3,"
                                       " code_weight: 4, max_overlap: 2, num_queries: 4}\n"
                                       "heads: [{kind: kernel}]\nranks: [8]\nseed_count: 2\n"
                                       "train: {lr: [0.02, 3e-3]}\n")
        sweep = self.client.submit(path)
        self.assertEqual(self.client.spec(sweep)["train"]["lr"], [0.02, 0.003])
        self.assertEqual(self.client.status(sweep)["total"], 4)
        proto = self.client.spec_proto(sweep)
        proto.name = "py-proto"
        again = self.client.submit(proto)
        self.assertEqual(self.client.spec(again),
                         dict(self.client.spec(sweep), name="py-proto"))

    def test_a_refused_submit_stores_nothing(self):
        before = len(self.client.list(include_archived=True))
        self.assertRefused("submit", dict(DEMO, name="py-bad", dataset=dict(DEMO["dataset"], m=0)),
                           "dataset.m must be in 1..64, got 0")
        self.assertRefused("submit", dict(DEMO, name="py-bad", train={"lrr": 1}),
                           '<dict>: unknown field "train.lrr"')
        self.assertEqual(len(self.client.list(include_archived=True)), before)

    def test_spec_of_an_unknown_sweep_is_not_found(self):
        with self.assertRaises(RanksweepError) as ctx:
            self.client.spec("no-such-sweep")
        self.assertNotIsInstance(ctx.exception, SpecError)
        self.assertEqual((ctx.exception.code, ctx.exception.call),
                         (grpc.StatusCode.NOT_FOUND, "spec"))


if __name__ == "__main__":
    unittest.main()
