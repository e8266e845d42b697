"""Specs from dicts and files to ranksweep.v1.SweepSpec, without a server."""

import os
import tempfile
import unittest

import grpc

from ranksweep import spec as spec_lib
from ranksweep import RanksweepError, SpecError
from ranksweep.v1 import ranksweep_pb2 as pb

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DEMO = {
    "name": "demo-witness",
    "dataset": {"kind": "witness", "m": 24, "seq_len": 3, "code_weight": 8,
                "max_overlap": 4, "num_queries": 12},
    "heads": [{"kind": "kernel", "feature_map": "elu1"}, {"kind": "softmax"}],
    "ranks": [1, 2, 4, 8, 16, 32, 64],
    "seed_count": 3,
    "train": {"lr": 0.02, "max_steps": 3000, "eval_every": 50, "early_stop_evals": 1},
}


class SpecTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, text, mode="w"):
        path = os.path.join(self.dir.name, name)
        with open(path, mode) as f:
            f.write(text)
        return path

    def assertSpecError(self, spec, message):
        with self.assertRaises(SpecError) as ctx:
            spec_lib.to_proto(spec)
        self.assertEqual(ctx.exception.message, message)
        self.assertEqual(ctx.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIsInstance(ctx.exception, RanksweepError)

    def test_dict_sets_every_field_it_names_and_nothing_else(self):
        p = spec_lib.to_proto(DEMO)
        self.assertEqual(p.name, "demo-witness")
        self.assertEqual(p.dataset.kind, pb.DATASET_KIND_WITNESS)
        self.assertEqual((p.dataset.m, p.dataset.seq_len, p.dataset.code_weight,
                          p.dataset.max_overlap, p.dataset.num_queries), (24, 3, 8, 4, 12))
        self.assertEqual([h.kind for h in p.heads], [pb.HEAD_KIND_KERNEL, pb.HEAD_KIND_SOFTMAX])
        self.assertEqual(p.heads[0].feature_map, pb.FEATURE_MAP_ELU1)
        # Unnamed enums stay UNSPECIFIED: the coordinator's default.
        self.assertEqual(p.heads[1].feature_map, pb.FEATURE_MAP_UNSPECIFIED)
        self.assertEqual(list(p.ranks), [1, 2, 4, 8, 16, 32, 64])
        self.assertEqual(p.seed_count, 3)
        self.assertEqual((p.train.lr, p.train.max_steps, p.train.eval_every,
                          p.train.early_stop_evals), (0.02, 3000, 50, 1))
        self.assertFalse(p.train.HasField("beta1"))  # unset: absent, the default
        self.assertFalse(p.no_result_cache)
        self.assertEqual(p.mode, pb.SWEEP_MODE_UNSPECIFIED)

    def test_enums_map_to_their_wire_values(self):
        p = spec_lib.to_proto({
            "name": "e", "mode": "search", "reuse_results": False,
            "dataset": {"kind": "pool", "bernoulli_p": 0.25, "test_size": 8},
            "heads": [{"kind": "multihead_kernel", "feature_map": "favor", "num_heads": 4,
                       "hidden": [32, 16]},
                      {"kind": "kernel", "construction": "indicator"},
                      {"kind": "softmax", "construction": "softmax_exact", "beta": 2}],
            "seeds": [7, 2**64 - 1],
            "train": {"loss": "ce", "early_stop_evals": 0, "schedule": "cosine",
                      "warmup_steps": 40}})
        self.assertEqual(p.mode, pb.SWEEP_MODE_SEARCH)
        self.assertTrue(p.no_result_cache)
        self.assertEqual(p.dataset.kind, pb.DATASET_KIND_POOL)
        self.assertEqual((p.dataset.bernoulli_p, p.dataset.test_size), (0.25, 8))
        self.assertEqual(p.heads[0].kind, pb.HEAD_KIND_MULTIHEAD_KERNEL)
        self.assertEqual(p.heads[0].feature_map, pb.FEATURE_MAP_FAVOR)
        self.assertEqual((p.heads[0].num_heads, list(p.heads[0].hidden)), (4, [32, 16]))
        self.assertEqual(p.heads[1].construction, pb.CONSTRUCTION_INDICATOR)
        self.assertEqual(p.heads[2].construction, pb.CONSTRUCTION_SOFTMAX_EXACT)
        self.assertEqual(p.heads[2].beta, 2.0)
        self.assertEqual(list(p.seeds), [7, 2**64 - 1])
        self.assertEqual(p.train.loss, pb.LOSS_KIND_CROSS_ENTROPY)
        self.assertEqual(p.train.schedule, pb.LR_SCHEDULE_COSINE)
        self.assertEqual(p.train.warmup_steps, 40)
        # Spec 0 = never stop early; the wire says that with -1.
        self.assertEqual(p.train.early_stop_evals, -1)

    def test_yaml_and_json_files_give_the_dict_s_spec(self):
        want = spec_lib.to_proto(DEMO)
        self.assertEqual(spec_lib.to_proto(os.path.join(REPO, "examples", "demo.yaml")), want)
        import json
        path = self.write("demo.json", json.dumps(DEMO))
        self.assertEqual(spec_lib.to_proto(path), want)
        # No extension: '{' first means JSON, anything else YAML.
        self.assertEqual(spec_lib.to_proto(self.write("spec", json.dumps(DEMO))), want)
        from pathlib import Path
        self.assertEqual(spec_lib.to_proto(Path(path)), want)
        self.assertEqual(spec_lib.load_spec(path), DEMO)

    def test_yaml_follows_the_core_schema_like_the_cli(self):
        path = self.write("s.yaml", "name: yes\nseed_count: 0x3\ntrain: {lr: 3e-3, "
                                    "weight_decay: .5}\nranks: [+2, 4]\ndataset: ~\n")
        self.assertEqual(spec_lib.load_spec(path),
                         {"name": "yes", "seed_count": 3, "dataset": None, "ranks": [2, 4],
                          "train": {"lr": 0.003, "weight_decay": 0.5}})
        quoted = self.write("q.yaml", "name: '12'\nseed_count: 2\n")
        self.assertEqual(spec_lib.to_proto(quoted).name, "12")

    def test_type_errors_name_the_field(self):
        self.assertSpecError({"dataset": {"m": 2.5}}, "dataset.m must be an integer, got 2.5")
        self.assertSpecError({"dataset": {"m": "3"}}, 'dataset.m must be an integer, got "3"')
        self.assertSpecError({"seed_count": True}, "seed_count must be an integer, got true")
        self.assertSpecError({"seeds": [1, -2]},
                             "seeds[1] must be a nonnegative integer, got -2")
        self.assertSpecError({"ranks": [2**31]}, "ranks[0] must be an integer in range, "
                                                 "got 2147483648")
        self.assertSpecError({"ranks": 4}, "ranks must be an array of integers, got 4")
        self.assertSpecError({"train": {"lr": "fast"}}, 'train.lr must be a number, got "fast"')
        self.assertSpecError({"train": {"lr": 10**400}},
                             f"train.lr must be a number, got {10**400}")
        self.assertSpecError({"dataset": {"final_query_only": 1}},
                             "dataset.final_query_only must be true or false, got 1")
        self.assertSpecError({"name": 5}, "name must be a string, got 5")
        self.assertSpecError({"heads": {"kind": "kernel"}},
                             "heads must be an array of head objects")
        self.assertSpecError({"heads": ["kernel"]},
                             "heads[0] must be a JSON object, got string")
        self.assertSpecError({"train": []}, "train must be a JSON object, got array")

    def test_a_list_where_a_value_stood_is_a_recipe_axis_like_the_cli(self):
        spec = {"dataset": {"kind": "pool", "train_size": [40, 80]},
                "train": {"max_steps": [100, 200, 300], "lr": [0.01, 0.003]}}
        p = spec_lib.to_proto(spec)
        # Canonical order (lr before max_steps before train_size), not the dict's.
        self.assertEqual([(a.name, list(a.values)) for a in p.axes],
                         [("lr", [0.01, 0.003]), ("max_steps", [100.0, 200.0, 300.0]),
                          ("train_size", [40.0, 80.0])])
        # The first value is also the field's, as the CLI's spec files read it.
        self.assertEqual((p.train.lr, p.train.max_steps, p.dataset.train_size), (0.01, 100, 40))
        self.assertEqual(spec["train"]["lr"], [0.01, 0.003])  # the dict is left as it was
        path = self.write("axes.yaml", "train: {lr: [0.01, 3e-3]}\n")
        self.assertEqual([list(a.values) for a in spec_lib.to_proto(path).axes],
                         [[0.01, 0.003]])
        self.assertEqual(len(spec_lib.to_proto(DEMO).axes), 0)

    def test_the_schedule_axis_is_written_by_name_and_sent_as_its_number(self):
        p = spec_lib.to_proto({"train": {"schedule": ["constant", "cosine"],
                                         "warmup_steps": [0, 50]}})
        self.assertEqual([(a.name, list(a.values)) for a in p.axes],
                         [("schedule", [0.0, 1.0]), ("warmup_steps", [0.0, 50.0])])
        self.assertSpecError({"train": {"schedule": ["cosine", "step"]}},
                             'train.schedule[1] must be one of constant, cosine; got "step"')

    def test_axis_errors_name_the_field_and_element(self):
        self.assertSpecError({"train": {"lr": []}},
                             "train.lr must be a number or a non-empty list of numbers, got []")
        self.assertSpecError({"train": {"lr": [0.1, "x"]}}, 'train.lr[1] must be a number, got "x"')
        self.assertSpecError({"dataset": {"m": [2, True]}},
                             "dataset.m[1] must be a number, got true")
        # Only the axis fields take lists.
        self.assertSpecError({"train": {"eval_every": [1, 2]}},
                             "train.eval_every must be an integer, got [1, 2]")
        path = self.write("bad.yaml", "train:\n  lr: []\n")
        with self.assertRaises(SpecError) as ctx:
            spec_lib.to_proto(path)
        self.assertEqual(ctx.exception.message,
                         f"{path}:2:3: train.lr must be a number or a non-empty list of "
                         "numbers, got []")

    def test_enum_errors_list_the_allowed_names(self):
        self.assertSpecError({"heads": [{"kind": "kernel"}, {"kind": "softmaxx"}]},
                             'heads[1].kind must be one of kernel, softmax, signed_kernel, '
                             'multihead_kernel; got "softmaxx"')
        self.assertSpecError({"train": {"loss": "mae"}},
                             'train.loss must be one of mse, ce; got "mae"')

    def test_prune_is_a_rule_or_an_object_and_reads_back(self):
        p = spec_lib.to_proto({**DEMO, "prune": "halving"})
        self.assertEqual(p.prune.rule, pb.PRUNE_RULE_HALVING)
        self.assertFalse(p.prune.HasField("eta"))  # the coordinator's default, 3
        p = spec_lib.to_proto({**DEMO, "prune": {"rule": "halving", "eta": 2, "margin": 0.1}})
        self.assertEqual((p.prune.eta, p.prune.margin), (2, 0.1))
        self.assertEqual(spec_lib.spec_to_dict(p)["prune"],
                         {"rule": "halving", "eta": 2, "min_steps": 0, "margin": 0.1})
        self.assertNotIn("prune", spec_lib.spec_to_dict(spec_lib.to_proto(DEMO)))
        self.assertSpecError({"prune": "asha"}, 'prune must be one of none, halving; got "asha"')
        self.assertSpecError({"prune": {"rule": "halving", "rungs": 3}},
                             'unknown field "prune.rungs"')
        self.assertSpecError({"prune": {"eta": "3"}}, 'prune.eta must be an integer, got "3"')

    def test_unknown_fields_are_refused_by_path(self):
        self.assertSpecError({"nmae": "x"}, 'unknown field "nmae"')
        self.assertSpecError({"dataset": {"mm": 3}}, 'unknown field "dataset.mm"')
        self.assertSpecError({"heads": [{"kind": "kernel", "rank": 4}]},
                             'unknown field "heads[0].rank"')

    def test_an_explicit_zero_is_sent_with_presence(self):
        p = spec_lib.to_proto({
            "dataset": {"kind": "pool", "m": 0, "max_overlap": 0, "test_pool_share": 0,
                        "hard_share": 0.0, "bernoulli_p": 0},
            "heads": [{"kind": "multihead_kernel", "num_heads": 0, "relu_eps": 0}],
            "train": {"lr": 0, "beta1": 0.0, "beta2": 0, "max_steps": 0, "eval_every": 0}})
        # Every field with a non-zero default is `optional`: a 0 given is
        # sent as 0 (the coordinator validates it), never as "absent".
        for msg, fields in ((p.dataset, ("m", "max_overlap", "test_pool_share", "hard_share",
                                         "bernoulli_p")),
                            (p.heads[0], ("num_heads", "relu_eps")),
                            (p.train, ("lr", "beta1", "beta2", "max_steps", "eval_every"))):
            for f in fields:
                self.assertTrue(msg.HasField(f), f)
                self.assertEqual(getattr(msg, f), 0, f)
        # It survives the wire: a parsed copy keeps the presence.
        again = pb.SweepSpec.FromString(p.SerializeToString())
        self.assertTrue(again.train.HasField("max_steps"))
        self.assertTrue(again.dataset.HasField("hard_share"))
        self.assertEqual((again.train.max_steps, again.dataset.hard_share), (0, 0.0))
        # A key left out (or null) stays absent: the coordinator's default.
        q = spec_lib.to_proto({"dataset": {"m": None}, "train": {"lr": 0.5}})
        self.assertFalse(q.dataset.HasField("m"))
        for f in ("beta1", "beta2", "max_steps", "eval_every"):
            self.assertFalse(q.train.HasField(f), f)
        self.assertTrue(q.train.HasField("lr"))
        self.assertFalse(spec_lib.to_proto(DEMO).dataset.HasField("hard_share"))
        # Zero is fine where it is the default, which needs no presence.
        self.assertEqual(spec_lib.to_proto({"dataset": {"num_queries": 0}}).dataset.num_queries,
                         0)

    def test_early_stop_evals_keeps_its_own_wire_numbers(self):
        # Spec 0 = never stop early: -1 on the wire, where 0 is the default.
        self.assertEqual(spec_lib.to_proto({"train": {"early_stop_evals": 0}})
                         .train.early_stop_evals, -1)
        self.assertEqual(spec_lib.to_proto({"train": {"early_stop_evals": 7}})
                         .train.early_stop_evals, 7)
        # The CLI's validator's words (common/spec), as a submit of the CLI prints them.
        self.assertSpecError({"train": {"early_stop_evals": -1}},
                             "train.early_stop_evals must be in 0..1000, got -1")

    def test_spec_to_dict_reads_back_the_dict_that_made_the_proto(self):
        # A partial dict: the fields it names come back, the rest stay out.
        self.assertEqual(spec_lib.spec_to_dict(spec_lib.to_proto(DEMO)),
                         {**DEMO, "seeds": [], "priority": 0, "reuse_results": True,
                          "heads": [{"kind": "kernel", "feature_map": "elu1", "hidden": [],
                                     "value_dim": 0, "score_dim": 0, "beta": 0.0},
                                    {"kind": "softmax", "hidden": [], "value_dim": 0,
                                     "score_dim": 0, "beta": 0.0}],
                          "train": {**DEMO["train"], "weight_decay": 0.0, "batch_size": 0},
                          "dataset": {**DEMO["dataset"], "final_query_only": False,
                                      "data_seed": 0}})
        # Zeros with presence, never-stop, no cache, a mode, axes by name.
        spec = {"name": "z", "dataset": {"kind": "pool", "m": [4, 6], "hard_share": 0},
                "train": {"max_steps": 0, "early_stop_evals": 0, "lr": [0.01, 0.003],
                          "schedule": ["constant", "cosine"], "warmup_steps": 5},
                "mode": "search", "reuse_results": False}
        got = spec_lib.spec_to_dict(spec_lib.to_proto(spec))
        self.assertEqual(got["dataset"], {"kind": "pool", "m": [4, 6], "hard_share": 0.0,
                                          "final_query_only": False, "data_seed": 0,
                                          "weight": 0, "pool_size": 0, "train_size": 0,
                                          "test_size": 0})
        self.assertEqual(got["dataset"]["m"], [4, 6])
        self.assertEqual(got["dataset"]["hard_share"], 0.0)
        self.assertEqual(got["train"]["max_steps"], 0)
        self.assertEqual(got["train"]["early_stop_evals"], 0)
        self.assertEqual(got["train"]["lr"], [0.01, 0.003])
        self.assertEqual(got["train"]["schedule"], ["constant", "cosine"])
        self.assertEqual(got["train"]["warmup_steps"], 5)
        self.assertEqual((got["mode"], got["reuse_results"]), ("search", False))
        # And it makes the same proto again.
        self.assertEqual(spec_lib.to_proto(got), spec_lib.to_proto(spec))

    def test_spec_to_dict_of_a_stored_spec_keeps_the_fields_of_its_kind(self):
        # The coordinator stores every field (proto/convert.cc); the dict,
        # as the CLI's SweepSpecToJson, names a witness family's fields only
        # for a witness dataset, and the schedule only when not constant.
        p = spec_lib.to_proto(DEMO)
        for f in ("pool_size", "train_size", "test_size", "weight", "bernoulli_p",
                  "test_pool_share", "hard_share", "final_query_only", "data_seed"):
            setattr(p.dataset, f, getattr(p.dataset, f))  # present, as stored
        p.dataset.pool_size = 40
        p.train.schedule = pb.LR_SCHEDULE_CONSTANT
        got = spec_lib.spec_to_dict(p)
        self.assertEqual(sorted(got["dataset"]), ["code_weight", "data_seed", "final_query_only",
                                                  "kind", "m", "max_overlap", "num_queries",
                                                  "seq_len"])
        self.assertNotIn("schedule", got["train"])
        self.assertNotIn("warmup_steps", got["train"])

    def test_yaml_errors_say_where(self):
        path = self.write("bad.yaml", "name: x\ndataset:\n  kind: witness\n  mm: 3\n")
        self.assertSpecError(path, f'{path}:4:3: unknown field "dataset.mm"')
        path = self.write("bad2.yaml", "name: x\nheads:\n  - kind: kernel\n  - kind: soft\n")
        self.assertSpecError(path, f'{path}:4:5: heads[1].kind must be one of kernel, softmax, '
                                   'signed_kernel, multihead_kernel; got "soft"')
        path = self.write("dup.yaml", "name: x\nseed_count: 2\nname: y\n")
        self.assertSpecError(path, f'{path}:3:1: duplicate key "name"')
        path = self.write("inf.yaml", "train:\n  lr: .inf\n")
        self.assertSpecError(path, f"{path}:2:7: non-finite number not allowed: .inf")
        path = self.write("list.yaml", "- 1\n- 2\n")
        self.assertSpecError(path, f"{path}:1:1: a sweep spec must be a mapping of fields")
        path = self.write("syntax.yaml", "name: [x\n")
        with self.assertRaises(SpecError) as ctx:
            spec_lib.to_proto(path)
        self.assertTrue(ctx.exception.message.startswith(f"{path}:2:1: "), ctx.exception.message)
        path = self.write("utf8.yaml", b"name: x\nheads: \xff\n", mode="wb")
        self.assertSpecError(path, f"{path}:2:8: the file is not valid UTF-8")

    def test_json_errors_name_the_file(self):
        path = self.write("bad.json", '{"name": "x", "dataset": {"mm": 3}}')
        self.assertSpecError(path, f'{path}: unknown field "dataset.mm"')
        path = self.write("syntax.json", '{"name": "x",\n "ranks": [1,]}')
        with self.assertRaises(SpecError) as ctx:
            spec_lib.to_proto(path)
        self.assertTrue(ctx.exception.message.startswith(
            f"{path}: JSON syntax error at line 2, column "), ctx.exception.message)

    def test_other_inputs(self):
        with self.assertRaises(FileNotFoundError):
            spec_lib.to_proto(os.path.join(self.dir.name, "missing.yaml"))
        with self.assertRaises(TypeError):
            spec_lib.to_proto(42)
        p = pb.SweepSpec(name="as-is")
        self.assertIs(spec_lib.to_proto(p), p)


if __name__ == "__main__":
    unittest.main()
