"""The Python client against real processes on loopback: ranksweepd on a
temporary SQLite file (port 0), one ranksweep-worker training real (small)
heads, and the ranksweep CLI, whose JSON every DataFrame is checked against.

Four sweeps: a witness family (no test split, theory bounds) with a kernel
head at two ranks and softmax (no rank), submitted from a dict; a pool
dataset with a test split, submitted from a YAML file; one cell whose spec
sets fields to 0 that default to other values; the witness family again
with an lr axis (two recipes), from YAML whose lr is a list. Apart from them, a quarantine
of a worker's results and the retraining of its cells by another worker.
RANKSWEEP_BIN_DIR names the directory of the three binaries.
"""

import json
import math
import os
import re
import subprocess
import unittest

import grpc
import pandas as pd
import yaml

import ranksweep
from ranksweep import RanksweepError, SpecError, frames
from ranksweep.v1 import ranksweep_pb2 as pb

from cluster import Cluster  # this directory is on sys.path
from frames_test import RESULT_DTYPES as LEGACY_DTYPES

# The coordinator's metric table adds its metrics before `recipe`: the
# columns of results() against it, as the frames read them off the reply.
RESULT_DTYPES = {k: v for k, v in LEGACY_DTYPES.items() if k != "recipe"}
RESULT_DTYPES.update({"final_test_loss": "float64", "recipe": "int64"})

HERE = os.path.dirname(os.path.abspath(__file__))
# A witness family (4 queries of a weight-4 code in {0,1}^8: 28 sequences, no
# test split): 2 ranks x 2 seeds of a kernel head + 2 softmax seeds. Read
# from its file (plain YAML, the same under PyYAML's rules as under the
# coordinator's), submitted as a dict.
with open(os.path.join(HERE, "tiny_sweep.yaml")) as _f:
    WITNESS = yaml.safe_load(_f)
WITNESS_CELLS = 6

# Bernoulli tokens in {0,1}^6 split into disjoint train and test pools.
POOL_YAML = """\
name: py-pool
dataset:
  kind: pool
  m: 6
  seq_len: 3
  bernoulli_p: 0.5
  pool_size: 40
  train_size: 64
  test_size: 32
heads:
  - {kind: kernel, feature_map: elu1}
ranks: [4]
seed_count: 2
train: {lr: 3e-2, max_steps: 200, eval_every: 50}
"""
POOL_CELLS = 2

# The witness family with two learning rates (an lr axis): a kernel head at
# rank 8, two seeds, so 2 recipes x 2 seeds = 4 cells.
AXES_YAML = """\
name: py-axes
dataset: {kind: witness, m: 8, seq_len: 3, code_weight: 4, max_overlap: 2, num_queries: 4}
heads:
  - {kind: kernel, feature_map: elu1}
ranks: [8]
seed_count: 2
train: {lr: [0.02, 3e-3], max_steps: 300, eval_every: 50}
"""
AXES_CELLS = 4

# Zeros where the defaults are not zero (max_steps 2000, hard_share 0.5):
# the coordinator stores and the worker trains them as 0.
ZERO = {
    "name": "py-zero",
    "dataset": {"kind": "pool", "m": 6, "seq_len": 3, "pool_size": 40, "train_size": 64,
                "test_size": 32, "hard_share": 0},
    "heads": [{"kind": "kernel", "feature_map": "elu1"}],
    "ranks": [4],
    "seed_count": 1,
    "train": {"max_steps": 0},
}


def cli_state(text):
    """A state of the CLI's JSON, which spells it "DONE" or, as the proto
    does, "CELL_STATE_DONE", as the frames spell it ("DONE")."""
    return text.replace("CELL_STATE_", "", 1)


def check_rows_match_cli(test, cluster, df, sweep, *cli_args, axes=()):
    """Asserts that `df` holds the rows `ranksweep results SWEEP --format json
    CLI_ARGS` prints, value for value. The CLI may print a missing value as
    null or as the wire's 0."""
    r = cluster.cli("results", sweep, "--format", "json", *cli_args)
    rows = json.loads(r.stdout)
    test.assertEqual(len(df), len(rows))
    for (_, got), want in zip(df.iterrows(), rows):
        res = want["result"]
        # Without a test split the CLI prints test sequences 0 (or leaves
        # the split out as null).
        test_split = res.get("test") or {}
        has_test = (test_split.get("sequences") or 0) > 0
        test.assertEqual(got["cell_id"], want["cell_id"])
        test.assertEqual(got["sweep_id"], want["sweep_id"])
        test.assertEqual(got["head"], want["head"])
        test.assertEqual(got["head_index"], want["head_index"])
        if want["rank"] in (0, None):
            test.assertIs(got["rank"], pd.NA)
        else:
            test.assertEqual(got["rank"], want["rank"])
        test.assertEqual(got["seed"], want["seed"])
        test.assertEqual(got["state"], cli_state(want["state"]))
        for m in ("error", "exact_accuracy", "position_accuracy", "max_abs_error"):
            test.assertEqual(got[f"train_{m}"], res["train"][m], m)
            if has_test:
                test.assertEqual(got[f"test_{m}"], test_split[m], m)
            else:
                test.assertTrue(math.isnan(got[f"test_{m}"]), m)
        test.assertEqual(got["train_sequences"], res["train"]["sequences"])
        if has_test:
            test.assertEqual(got["test_sequences"], test_split["sequences"])
        else:
            test.assertIs(got["test_sequences"], pd.NA)
        for f in ("final_loss", "steps", "wall_seconds", "device"):
            test.assertEqual(got[f], res[f], f)
        test.assertEqual(got["distinct_queries"], res["facts"]["distinct_queries"])
        for bound in ("rank_lower_bound", "rank_upper_bound"):
            if res["facts"][bound] in (0, None):
                test.assertIs(got[bound], pd.NA)
            else:
                test.assertEqual(got[bound], res["facts"][bound])
        for f in ("worker_id", "attempt", "lease_id"):
            test.assertEqual(got[f], want[f], f)
        for f in ("build_id", "torch_version"):
            test.assertEqual(got[f], want["worker_version"][f], f)
        test.assertEqual(got["finished"],
                         pd.Timestamp(want["finished_unix_ms"], unit="ms", tz="UTC"))
        test.assertEqual(got["failure"], want.get("failure") or None)
        if res.get("first_exact_step") is None:
            test.assertIs(got["first_exact_step"], pd.NA)
        else:
            test.assertEqual(got["first_exact_step"], res["first_exact_step"])
        if res.get("final_test_loss") is None:
            test.assertTrue(math.isnan(got["final_test_loss"]))
        else:
            test.assertEqual(got["final_test_loss"], res["final_test_loss"])
        test.assertEqual(got["recipe"], want.get("recipe") or 0)
        for name in axes:  # the CLI adds a key per axis with the recipe's value
            test.assertEqual(got[name], want[name], name)


class ClientEndToEndTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()
        try:
            cls.cluster.start()
            cls.client = ranksweep.Client(addr=cls.cluster.addr)
            cls.witness = cls.client.submit(WITNESS)
            cls.witness_events = list(cls.client.watch(cls.witness))
            pool_path = os.path.join(cls.cluster.dir.name, "pool.yaml")
            with open(pool_path, "w") as f:
                f.write(POOL_YAML)
            cls.pool = cls.client.submit(pool_path)
            cls.pool_last = cls.client.wait(cls.pool)
            cls.zero = cls.client.submit(ZERO)
            cls.zero_last = cls.client.wait(cls.zero)
            axes_path = os.path.join(cls.cluster.dir.name, "axes.yaml")
            with open(axes_path, "w") as f:
                f.write(AXES_YAML)
            cls.axes = cls.client.submit(axes_path)
            cls.axes_last = cls.client.wait(cls.axes)
        except BaseException:
            cls.cluster.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.cluster.stop()

    def cli_json(self, *args):
        return json.loads(self.cluster.cli(*args).stdout)

    # ------------------------------------------------------------ watch

    def test_watch_follows_the_sweep_to_done(self):
        events = self.witness_events
        self.assertGreaterEqual(len(events), 2)
        last = events[-1]
        self.assertEqual((last.sweep_id, last.name, last.state), (self.witness, "py-tiny",
                                                                  "DONE"))
        self.assertTrue(last.ended)
        self.assertEqual((last.total, last.done, last.failed, last.pending, last.running),
                         (WITNESS_CELLS, WITNESS_CELLS, 0, 0, 0))
        # The event of the last cell may already read the sweep DONE; from
        # the first ended event on, every one says DONE.
        first_end = next(i for i, e in enumerate(events) if e.ended)
        self.assertEqual({e.state for e in events[first_end:]}, {"DONE"})
        self.assertEqual({e.state for e in events[:first_end]}, {"RUNNING"})
        done = [e.done for e in events]
        self.assertEqual(done, sorted(done))
        self.assertEqual(self.pool_last.state, "DONE")
        self.assertEqual(self.pool_last.done, POOL_CELLS)

    # ------------------------------------------------------------ results

    def test_witness_results(self):
        df = self.client.results(self.witness)
        self.assertEqual(len(df), WITNESS_CELLS)
        self.assertEqual(list(df.columns), list(RESULT_DTYPES))
        self.assertEqual({c: str(t) for c, t in df.dtypes.items()}, RESULT_DTYPES)
        cells = sorted((h, -1 if r is pd.NA else r, s)
                       for h, r, s in zip(df["head"], df["rank"], df["seed"]))
        self.assertEqual(cells, [("kernel/elu1", 1, 0), ("kernel/elu1", 1, 1),
                                 ("kernel/elu1", 8, 0), ("kernel/elu1", 8, 1),
                                 ("softmax", -1, 0), ("softmax", -1, 1)])
        self.assertEqual(df["state"].tolist(), ["DONE"] * WITNESS_CELLS)
        # The witness family has no test split: missing, not 1.0 or 0.
        for c in ("test_sequences", "test_error", "test_exact_accuracy",
                  "test_position_accuracy", "test_max_abs_error"):
            self.assertTrue(df[c].isna().all(), c)
        self.assertTrue(df["train_error"].notna().all())
        self.assertEqual(df["train_sequences"].tolist(), [28] * WITNESS_CELLS)
        # Every position is scored, so the 4 codewords and their 4 complement
        # keys are all queries: the upper bound n is 8 distinct queries.
        self.assertEqual(df["distinct_queries"].tolist(), [8] * WITNESS_CELLS)
        self.assertEqual(df["rank_upper_bound"].tolist(), [8] * WITNESS_CELLS)
        self.assertTrue(df["rank_lower_bound"].notna().all())
        self.assertEqual(df["device"].tolist(), ["cpu"] * WITNESS_CELLS)
        check_rows_match_cli(self, self.cluster, df, self.witness)

    def test_pool_results_keep_the_test_split(self):
        df = self.client.results(self.pool)
        self.assertEqual(len(df), POOL_CELLS)
        self.assertEqual({c: str(t) for c, t in df.dtypes.items()}, RESULT_DTYPES)
        self.assertEqual(df["rank"].tolist(), [4, 4])
        self.assertEqual(df["test_sequences"].tolist(), [32, 32])
        self.assertTrue(df["test_error"].notna().all())
        # The loss over the test split, as the worker measured it: a mean of
        # squared errors, at most the largest one squared.
        self.assertTrue((df["final_test_loss"] > 0).all())
        self.assertTrue((df["final_test_loss"] <= df["test_max_abs_error"] ** 2 * (1 + 1e-5)).all())
        self.assertTrue(df["rank_lower_bound"].isna().all())  # no theory bound here
        check_rows_match_cli(self, self.cluster, df, self.pool)

    def test_curves_end_at_the_final_metrics_and_match_the_cli(self):
        results = self.client.results(self.pool)
        df = self.client.curves(self.pool)
        self.assertEqual(list(df.columns), list(frames.CURVE_COLUMNS) + ["recipe"])
        self.assertEqual(sorted(set(df["cell_id"])), sorted(results["cell_id"]))
        for _, row in results.iterrows():
            curve = df[df["cell_id"] == row["cell_id"]]
            steps = curve["step"].tolist()
            # One point per evaluation: every eval_every (50) steps, up to
            # the seed's last step, whose point is its final metrics.
            self.assertEqual(steps, list(range(50, row["steps"] + 1, 50)))
            last = curve.iloc[-1]
            self.assertAlmostEqual(last["train_error"], row["train_error"], places=6)
            self.assertAlmostEqual(last["test_error"], row["test_error"], places=6)
            self.assertAlmostEqual(last["loss"], row["final_loss"], places=5)
        cli = self.cli_json("results", self.pool, "--curves", "--format", "json")
        self.assertEqual(len(cli), len(df))
        for (_, got), want in zip(df.iterrows(), cli):
            for k in ("cell_id", "seed", "step"):
                self.assertEqual(got[k], want[k], k)
            for k in ("loss", "train_error", "train_position_accuracy", "test_error",
                      "test_position_accuracy"):
                self.assertAlmostEqual(got[k], want[k], places=6, msg=k)
        # Without a test split the test columns are missing.
        witness = self.client.curves(self.witness, head="kernel/elu1", ranks=[8])
        self.assertEqual(sorted(set(witness["seed"])), [0, 1])
        self.assertTrue(witness["test_error"].isna().all())

    def test_results_filters_and_pages(self):
        df = self.client.results(self.witness, head="kernel/elu1", ranks=[8], page_size=1)
        self.assertEqual(df["rank"].tolist(), [8, 8])
        self.assertEqual(df["seed"].tolist(), [0, 1])
        pd.testing.assert_frame_equal(
            self.client.results(self.witness, page_size=2),
            self.client.results(self.witness))
        self.assertEqual(len(self.client.results(self.witness, state="failed")), 0)
        self.assertEqual(len(self.client.results(self.witness, state="DONE")), WITNESS_CELLS)
        # Nothing invalidated here: include_invalid adds no row.
        self.assertEqual(len(self.client.results(self.witness, state="invalid")), 0)
        pd.testing.assert_frame_equal(self.client.results(self.witness, include_invalid=True),
                                      self.client.results(self.witness))
        with self.assertRaises(ValueError) as ctx:
            self.client.results(self.witness, state="leased")
        self.assertEqual(str(ctx.exception),
                         'state: "leased" is not one of done, failed, pruned, invalid')

    def test_groups_match_the_cli(self):
        df = self.client.groups(self.witness, by="head,rank")
        want = self.cli_json("results", self.witness, "--group-by", "head,rank",
                             "--format", "json")
        self.assertEqual(len(df), 3)
        self.assertEqual(len(want), 3)
        self.assertEqual(str(df["rank"].dtype), "Int64")
        for (_, got), g in zip(df.iterrows(), want):
            self.assertEqual(got["head"], g["head"])
            self.assertEqual(got["rank"] if got["rank"] is not pd.NA else 0, g["rank"] or 0)
            self.assertEqual((got["n"], got["expected"], got["exact_seeds"]),
                             (g["n"], g["expected"], g["exact_seeds"]))
            self.assertEqual((got["n"], got["expected"]), (2, 2))
            self.assertEqual(got["missing_seeds"], [])
            for a in ("train_error", "train_exact_accuracy", "train_position_accuracy"):
                for f in ("mean", "std", "min", "max", "ci95"):
                    self.assertEqual(got[f"{a}_{f}"], g[a][f], f"{a}_{f}")
            self.assertTrue(all(math.isnan(got[f"test_error_{f}"])
                                for f in ("mean", "std", "min", "max", "ci95")))
            self.assertIs(got["test_exact_seeds"], pd.NA)
            # The optional metrics: n and the aggregate, or null in the CLI
            # when no done seed has one (no test split: no test loss).
            for m in ("first_exact_step", "final_test_loss"):
                if g[m] is None:
                    self.assertEqual(got[f"{m}_n"], 0, m)
                    self.assertTrue(math.isnan(got[f"{m}_mean"]), m)
                else:
                    self.assertEqual(got[f"{m}_n"], g[m]["n"], m)
                    for f in ("mean", "std", "min", "max", "ci95"):
                        if f in ("std", "ci95") and g[m]["n"] < 2:  # no spread of one
                            self.assertTrue(math.isnan(got[f"{m}_{f}"]), f"{m}_{f}")
                        else:
                            self.assertEqual(got[f"{m}_{f}"], g[m][f], f"{m}_{f}")
        self.assertIs(df["rank"][2], pd.NA)
        pool = self.client.groups(self.pool, by=("rank", "head"))
        self.assertEqual(len(pool), 1)
        self.assertFalse(math.isnan(pool["test_error_mean"][0]))
        # The group's test loss is the mean of its seeds' own.
        seeds = self.client.results(self.pool)
        self.assertEqual(pool["final_test_loss_n"][0], POOL_CELLS)
        self.assertAlmostEqual(pool["final_test_loss_mean"][0],
                               seeds["final_test_loss"].mean(), places=12)
        self.assertEqual(pool["final_test_loss_min"][0], seeds["final_test_loss"].min())
        self.assertEqual(pool["final_test_loss_max"][0], seeds["final_test_loss"].max())
        with self.assertRaises(ValueError):
            self.client.groups(self.witness, by="seed")

    def test_summary_matches_the_cli(self):
        df = self.client.summary(self.witness)
        want = self.cli_json("results", self.witness, "--summary", "--format", "json")
        self.assertEqual(df["head"].tolist(), ["kernel/elu1", "softmax"])
        self.assertEqual(df["has_rank"].tolist(), [True, False])
        for (_, got), h in zip(df.iterrows(), want["heads"]):
            self.assertEqual(got["head"], h["head"])
            self.assertEqual(got["reason"], h["reason"])
            if h["transition_defined"]:
                self.assertEqual(got["transition_rank"], h["transition_rank"])
            else:
                self.assertIs(got["transition_rank"], pd.NA)
            self.assertIs(got["test_transition_rank"], pd.NA)
            self.assertIsNone(got["test_reason"])
            # The bounds only beside a head they apply to; no_bound says why not.
            self.assertEqual(got["no_bound"], h["no_bound"] or None)
            if h["no_bound"]:
                self.assertIs(got["rank_lower_bound"], pd.NA)
                self.assertIs(got["rank_upper_bound"], pd.NA)
            else:
                self.assertEqual(got["rank_lower_bound"], want["facts"]["rank_lower_bound"])
                self.assertEqual(got["rank_upper_bound"], want["facts"]["rank_upper_bound"])
            self.assertEqual(got["criterion"], want["criterion"])
        self.assertIs(df["transition_rank"][1], pd.NA)  # softmax has no rank
        self.assertEqual(df["no_bound"].tolist(), [None, "softmax"])
        self.assertEqual(df["criterion"].tolist(), ["all", "all"])
        self.assertEqual(df["rank_upper_bound"].tolist(), [8, pd.NA])
        pool = self.client.summary(self.pool)
        self.assertEqual(pool["rank_upper_bound"].tolist(), [pd.NA])
        self.assertIsNotNone(pool["test_reason"][0])
        # Another criterion travels to the coordinator, as --criterion does.
        one = self.client.summary(self.witness, criterion="seeds:1")
        want = self.cli_json("results", self.witness, "--summary", "--format", "json",
                             "--criterion", "seeds:1")
        self.assertEqual(want["criterion"], "seeds:1")
        self.assertEqual(one["reason"].tolist(), [h["reason"] for h in want["heads"]])
        with self.assertRaises(RanksweepError) as ctx:
            self.client.summary(self.witness, criterion="mean:2")
        self.assertEqual(ctx.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(ctx.exception.message,
                         'criterion: "mean:2" is out of range: X must be in (0, 1]; use all '
                         '(every seed exact), mean:X (mean exact accuracy >= X, 0 < X <= 1) or '
                         'seeds:K (at least K seeds exact, K >= 1)')

    # ------------------------------------------------------------ recipes

    def test_recipe_axes_match_the_cli(self):
        self.assertEqual((self.axes_last.state, self.axes_last.done), ("DONE", AXES_CELLS))
        self.assertEqual(self.client.spec(self.axes)["train"]["lr"],
                         [0.02, 0.003])  # the axis where lr stood
        proto = self.client.spec_proto(self.axes)
        self.assertEqual([(a.name, list(a.values)) for a in proto.axes],
                         [("lr", [0.02, 0.003])])
        df = self.client.results(self.axes)
        self.assertEqual(list(df.columns), list(RESULT_DTYPES) + ["lr"])
        self.assertEqual(str(df["lr"].dtype), "float64")
        self.assertEqual(df.groupby("lr").size().to_dict(), {0.003: 2, 0.02: 2})
        self.assertEqual(sorted(zip(df["recipe"], df["lr"], df["seed"])),
                         [(0, 0.02, 0), (0, 0.02, 1), (1, 0.003, 0), (1, 0.003, 1)])
        self.assertEqual(df["steps"].notna().sum(), AXES_CELLS)
        check_rows_match_cli(self, self.cluster, df, self.axes, axes=("lr",))
        # Groups: one per recipe, named by the axis as --group-by takes it.
        groups = self.client.groups(self.axes, by="head,rank,lr")
        want = self.cli_json("results", self.axes, "--group-by", "head,rank,lr",
                             "--format", "json")
        self.assertEqual(len(groups), 2)
        self.assertEqual(len(want), 2)
        for (_, got), g in zip(groups.iterrows(), want):
            self.assertEqual((got["head"], got["rank"], got["recipe"], got["lr"]),
                             (g["head"], g["rank"], g.get("recipe") or 0, g["lr"]))
            self.assertEqual((got["n"], got["exact_seeds"]), (g["n"], g["exact_seeds"]))
            self.assertEqual(got["train_error_mean"], g["train_error"]["mean"])
        self.assertEqual(groups["lr"].tolist(), [0.02, 0.003])
        with self.assertRaises(ValueError) as ctx:
            self.client.groups(self.axes, by="head,rank")
        self.assertEqual(str(ctx.exception),
                         "by='head,rank' is not supported; use \"head,rank,lr\"")
        # The summary names the recipes meeting the criterion at the
        # transition rank, by the labels the CLI prints.
        summary = self.client.summary(self.axes, criterion="seeds:1")
        cli = self.cli_json("results", self.axes, "--summary", "--format", "json",
                            "--criterion", "seeds:1")
        self.assertEqual(summary["criterion"].tolist(), [cli["criterion"]])
        head = cli["heads"][0]
        self.assertEqual(summary["no_bound"].tolist(), [head.get("no_bound") or None])
        if head["transition_defined"]:
            outcome = next(o for o in head["ranks"] if o["rank"] == head["transition_rank"])
            labels = [frames.recipe_label(proto, r) for r in outcome["recipes_meeting"]]
            self.assertEqual(summary["recipes_meeting"][0], labels)
            self.assertTrue(set(labels) <= {"lr=0.02", "lr=0.003"})
        else:
            self.assertEqual(summary["recipes_meeting"][0], [])

    def test_spec_is_the_dict_the_cli_resolves_the_file_to(self):
        # spec() of each sweep equals what `ranksweep submit --dry-run`
        # prints for the file or dict it was submitted from: the dict
        # submit() takes, every field resolved, axes as lists.
        sources = {self.pool: POOL_YAML, self.axes: AXES_YAML, self.zero: ZERO,
                   self.witness: WITNESS}
        for i, (sweep, source) in enumerate(sources.items()):
            ext = "json" if isinstance(source, dict) else "yaml"
            path = os.path.join(self.cluster.dir.name, f"spec{i}.{ext}")
            with open(path, "w") as f:
                if isinstance(source, dict):
                    json.dump(source, f)
                else:
                    f.write(source)
            got = self.client.spec(sweep)
            self.assertEqual(got, self.cli_json("submit", "-f", path, "--dry-run"), sweep)
        self.assertEqual(self.client.spec(self.zero)["train"]["max_steps"], 0)
        self.assertNotIn("pool_size", self.client.spec(self.witness)["dataset"])

    # ------------------------------------------------------------ the rest

    def test_list_and_workers(self):
        sweeps = self.client.list(state="done")
        self.assertEqual(sorted(sweeps["sweep_id"]),
                         sorted([self.witness, self.pool, self.zero, self.axes]))
        self.assertEqual(sweeps["state"].tolist(), ["DONE"] * 4)
        self.assertEqual(sweeps["owner"].tolist(), ["local"] * 4)
        by_id = sweeps.set_index("sweep_id")
        self.assertEqual(by_id.loc[self.witness, "done"], WITNESS_CELLS)
        self.assertEqual(by_id.loc[self.witness, "total"], WITNESS_CELLS)
        self.assertTrue(sweeps["finished"].notna().all())
        self.assertEqual(self.client.status(self.pool)["done"], POOL_CELLS)
        workers = self.client.workers()
        self.assertEqual(len(workers), 1)
        self.assertEqual(workers["device"][0], "cpu")
        self.assertEqual(workers["slots"][0], 1)
        self.assertTrue(workers["alive"][0])
        self.assertGreaterEqual(workers["completed_cells"][0], WITNESS_CELLS + POOL_CELLS + 1)

    # ------------------------------------------------------------ zeros

    def test_explicit_zeros_are_stored_and_trained_as_zero(self):
        self.assertEqual((self.zero_last.state, self.zero_last.done), ("DONE", 1))
        # The stored spec, as GetSweep returns it: the zeros are present.
        stored = self.client._stub.GetSweep(pb.GetSweepRequest(sweep_id=self.zero)).sweep.spec
        self.assertTrue(stored.train.HasField("max_steps"))
        self.assertTrue(stored.dataset.HasField("hard_share"))
        self.assertEqual(stored.train.max_steps, 0)
        self.assertEqual(stored.dataset.hard_share, 0.0)
        # Fields the spec left out get their defaults, not 0.
        self.assertEqual((stored.train.lr, stored.dataset.test_pool_share), (0.01, 0.5))
        # The spec `submit --dry-run` shows for the same file says the same.
        path = os.path.join(self.cluster.dir.name, "zero.json")
        with open(path, "w") as f:
            json.dump(ZERO, f)
        shown = self.cli_json("submit", "-f", path, "--dry-run")
        self.assertEqual((shown["train"]["max_steps"], shown["dataset"]["hard_share"]), (0, 0))
        self.assertEqual((shown["train"]["lr"], shown["dataset"]["test_pool_share"]),
                         (0.01, 0.5))
        # The worker trained 0 steps (the default would have trained >= 150),
        # evaluating the initial weights on both splits.
        df = self.client.results(self.zero)
        self.assertEqual(df["steps"].tolist(), [0])
        self.assertEqual(df["train_sequences"].tolist(), [64])
        self.assertEqual(df["test_sequences"].tolist(), [32])

    def test_zeros_out_of_range_get_the_coordinator_s_error_as_the_cli_prints_it(self):
        cases = (
            (dict(WITNESS, name="py-zero-m", dataset=dict(WITNESS["dataset"], m=0)),
             "dataset.m must be in 1..64, got 0"),
            (dict(WITNESS, name="py-zero-lr", train=dict(WITNESS["train"], lr=0)), None),
            (dict(WITNESS, name="py-zero-eval", train=dict(WITNESS["train"], eval_every=0)),
             None),
        )
        for spec, message in cases:
            with self.assertRaises(RanksweepError) as ctx:
                self.client.submit(spec)
            self.assertIsInstance(ctx.exception, SpecError)  # a spec refused
            self.assertEqual(ctx.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertEqual(ctx.exception.call, "submit")  # by the coordinator
            if message is not None:
                self.assertEqual(ctx.exception.message, message)
            path = os.path.join(self.cluster.dir.name, f"{spec['name']}.json")
            with open(path, "w") as f:
                json.dump(spec, f)
            cli = self.cluster.cli("submit", "-f", path, "--dry-run", check=False)
            self.assertEqual(cli.returncode, 1, spec["name"])
            self.assertEqual(cli.stderr, f"ranksweep: {ctx.exception.message}\n", spec["name"])
            # Nothing was stored.
            self.assertNotIn(spec["name"], self.client.list()["name"].tolist())

    def test_cancel(self):
        spec = dict(WITNESS, name="py-cancel",
                    train={"max_steps": 10000000, "early_stop_evals": 0})
        sweep = self.client.submit(spec)
        self.assertEqual(self.client.cancel(sweep), WITNESS_CELLS)
        last = self.client.wait(sweep)
        self.assertEqual((last.state, last.cancelled), ("CANCELLED", WITNESS_CELLS))

    def test_errors_carry_the_code_and_message(self):
        with self.assertRaises(RanksweepError) as ctx:
            self.client.results("no-such-sweep")
        self.assertEqual(ctx.exception.code, grpc.StatusCode.NOT_FOUND)
        self.assertEqual(ctx.exception.call, "results")
        with self.assertRaises(RanksweepError) as ctx:
            list(self.client.watch("no-such-sweep"))
        self.assertEqual(ctx.exception.code, grpc.StatusCode.NOT_FOUND)
        bad = dict(WITNESS, dataset=dict(WITNESS["dataset"], m=99))
        with self.assertRaises(RanksweepError) as ctx:
            self.client.submit(bad)
        self.assertEqual(ctx.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(ctx.exception.message, "dataset.m must be in 1..64, got 99")
        with ranksweep.Client(addr="127.0.0.1:1", timeout=5) as nowhere:
            with self.assertRaises(RanksweepError) as ctx:
                nowhere.list()
        self.assertEqual(ctx.exception.code, grpc.StatusCode.UNAVAILABLE)

    def test_spec_errors_read_as_the_cli_s(self):
        cases = {
            "unknown.yaml": "name: x\ndataset:\n  kind: witness\n  mm: 3\n",
            "enum.yaml": "name: x\nheads:\n  - kind: kernel\n  - kind: soft\n",
            "type.yaml": "name: x\ndataset: {m: 2.5}\n",
            "dup.yaml": "name: x\nseed_count: 2\nname: y\n",
            "seeds.yaml": "name: x\nseeds: [1, -2]\n",
            "list.yaml": "- 1\n",
            "unknown.json": '{"name": "x", "train": {"lr": 0.1, "step": 3}}',
        }
        for name, text in cases.items():
            path = os.path.join(self.cluster.dir.name, name)
            with open(path, "w") as f:
                f.write(text)
            with self.assertRaises(SpecError) as ctx:
                self.client.submit(path)
            self.assertEqual(ctx.exception.call, "submit")  # the coordinator's parser
            cli = self.cluster.cli("submit", "-f", path, "--dry-run", check=False)
            self.assertEqual(cli.returncode, 1, name)
            self.assertEqual(cli.stderr, f"ranksweep: {ctx.exception.message}\n", name)


class ClientQuarantineTest(unittest.TestCase):
    """quarantine() of a real worker's results, and the rows before and
    after another worker trains its cells again."""

    def setUp(self):
        self.cluster = Cluster()
        self.addCleanup(self.cluster.stop)

    def test_quarantined_results_leave_until_retrained_and_stay_queryable(self):
        c = self.cluster
        c.start_server()
        first = c.start_worker()
        client = ranksweep.Client(addr=c.addr)
        self.addCleanup(client.close)
        sweep = client.submit(dict(WITNESS, name="py-quarantine"))
        self.assertEqual(client.wait(sweep).done, WITNESS_CELLS)
        # The worker that went bad leaves before its cells come back.
        self.assertEqual(c.stop_process(first), 0)
        trained = client.results(sweep)
        self.assertEqual(trained["state"].tolist(), ["DONE"] * WITNESS_CELLS)
        (bad,) = trained["worker_id"].unique()
        groups = client.groups(sweep)
        self.assertEqual(groups["n"].tolist(), [2, 2, 2])

        # --insecure_local: every caller is "local", an admin.
        self.assertEqual(client.quarantine(bad), {
            "quarantine_id": 1, "results_invalidated": WITNESS_CELLS, "copies_invalidated": 0,
            "cells_reset": WITNESS_CELLS, "sweeps_reopened": [sweep], "token_held": ""})
        status = client.status(sweep)
        self.assertEqual((status["state"], status["pending"], status["done"]),
                         ("RUNNING", WITNESS_CELLS, 0))
        self.assertEqual(len(client.results(sweep)), 0)
        groups = client.groups(sweep)
        self.assertEqual((groups["n"].tolist(), groups["expected"].tolist()),
                         ([0, 0, 0], [2, 2, 2]))
        self.assertTrue(groups["train_error_mean"].isna().all())
        invalid = client.results(sweep, include_invalid=True)
        self.assertEqual(invalid["state"].tolist(), ["INVALID"] * WITNESS_CELLS)
        self.assertEqual(sorted(invalid["cell_id"]), sorted(trained["cell_id"]))
        # The rows as they were stored, and who invalidated them.
        by_cell = trained.set_index("cell_id")
        for _, row in invalid.iterrows():
            was = by_cell.loc[row["cell_id"]]
            for f in ("head", "head_index", "rank", "seed", "train_error",
                      "train_exact_accuracy", "final_loss", "steps", "worker_id", "lease_id"):
                if pd.isna(was[f]):  # softmax has no rank
                    self.assertIs(row[f], pd.NA, f)
                else:
                    self.assertEqual(row[f], was[f], f)
            self.assertRegex(row["failure"],
                             rf"^invalidated \S+ by local: quarantine 1 of worker {re.escape(bad)}$")
        pd.testing.assert_frame_equal(client.results(sweep, state="invalid"), invalid)
        pd.testing.assert_frame_equal(client.results(sweep, state="invalid",
                                                     include_invalid=True), invalid)
        check_rows_match_cli(self, c, invalid, sweep, "--include-invalid")
        # A time after every result invalidates nothing more.
        self.assertEqual(client.quarantine(bad, since="2100-01-01T00:00:00Z"), {
            "quarantine_id": 2, "results_invalidated": 0, "copies_invalidated": 0,
            "cells_reset": 0, "sweeps_reopened": [], "token_held": ""})

        # Another worker trains the cells again.
        c.start_worker()
        self.assertEqual(client.wait(sweep).done, WITNESS_CELLS)
        again = client.results(sweep)
        self.assertEqual(again["state"].tolist(), ["DONE"] * WITNESS_CELLS)
        self.assertEqual(len(again["worker_id"].unique()), 1)
        self.assertNotEqual(again["worker_id"][0], bad)
        self.assertEqual(client.groups(sweep)["n"].tolist(), [2, 2, 2])
        both = client.results(sweep, include_invalid=True)
        self.assertEqual(both["state"].tolist(),
                         ["DONE"] * WITNESS_CELLS + ["INVALID"] * WITNESS_CELLS)
        pd.testing.assert_frame_equal(both.iloc[WITNESS_CELLS:].reset_index(drop=True), invalid)
        check_rows_match_cli(self, c, both, sweep, "--include-invalid")
        with self.assertRaises(RanksweepError) as ctx:
            client.quarantine("no-such-worker")
        self.assertEqual((ctx.exception.code, ctx.exception.call),
                         (grpc.StatusCode.NOT_FOUND, "quarantine"))


class ClientWatchRestartTest(unittest.TestCase):
    """watch() rides out a coordinator that crashes and comes back."""

    def setUp(self):
        self.cluster = Cluster()
        self.addCleanup(self.cluster.stop)

    def test_watch_reconnects_after_a_crash(self):
        self.cluster.start(worker=False)  # no worker: the sweep stays RUNNING
        port = self.cluster.addr.rsplit(":", 1)[1]
        with ranksweep.Client(addr=self.cluster.addr) as client:
            sweep = client.submit(dict(WITNESS, name="py-restart"))
            events = client.watch(sweep, reconnect=60)
            first = next(events)
            self.assertEqual((first.state, first.pending), ("RUNNING", WITNESS_CELLS))
            self.cluster.kill_server()
            self.cluster.start_server(port)  # same file, same port
            again = next(events)  # the first event of the new stream
            self.assertEqual((again.sweep_id, again.state), (sweep, "RUNNING"))
            self.assertEqual(client.cancel(sweep), WITNESS_CELLS)
            rest = list(events)
            self.assertEqual(rest[-1].state, "CANCELLED")
            self.assertEqual(rest[-1].cancelled, WITNESS_CELLS)
        with ranksweep.Client(addr=self.cluster.addr) as client:
            events = client.watch(client.submit(dict(WITNESS, name="py-lost")), reconnect=0)
            next(events)
            self.cluster.kill_server()
            with self.assertRaises(RanksweepError) as ctx:
                next(events)  # reconnect=0: the lost coordinator ends the watch
            self.assertEqual(ctx.exception.code, grpc.StatusCode.UNAVAILABLE)


class ClientAuthTest(unittest.TestCase):
    """Tokens (also through RANKSWEEP_TOKEN and RANKSWEEP_ADDR) and TLS, against
    a coordinator that authenticates."""

    def setUp(self):
        self.cluster = Cluster(insecure=False)
        self.addCleanup(self.cluster.stop)
        self.token = self.cluster.create_token("alice", "user")
        saved = {k: os.environ.get(k) for k in ("RANKSWEEP_ADDR", "RANKSWEEP_TOKEN")}

        def restore():
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.addCleanup(restore)

    def test_environment(self):
        self.cluster.start(worker=False)
        os.environ["RANKSWEEP_ADDR"] = self.cluster.addr
        os.environ.pop("RANKSWEEP_TOKEN", None)
        with ranksweep.Client() as anonymous:
            self.assertEqual(anonymous.addr, self.cluster.addr)
            with self.assertRaises(RanksweepError) as ctx:
                anonymous.list()
            self.assertEqual(ctx.exception.code, grpc.StatusCode.UNAUTHENTICATED)
        os.environ["RANKSWEEP_TOKEN"] = self.token
        with ranksweep.Client() as alice:
            sweep = alice.submit(dict(WITNESS, name="py-token"))
            sweeps = alice.list()
            self.assertEqual(sweeps["sweep_id"].tolist(), [sweep])
            self.assertEqual(sweeps["owner"].tolist(), ["alice"])
            self.assertEqual(alice.cancel(sweep), WITNESS_CELLS)
        with ranksweep.Client(token="rs_not-a-token") as wrong:
            with self.assertRaises(RanksweepError) as ctx:
                wrong.list()
            self.assertEqual(ctx.exception.code, grpc.StatusCode.UNAUTHENTICATED)

    def test_quarantine_is_for_admins(self):
        admin = self.cluster.create_token("ops", "admin")
        self.cluster.start(worker=False)
        with ranksweep.Client(addr=self.cluster.addr, token=self.token) as alice:
            with self.assertRaises(RanksweepError) as ctx:
                alice.quarantine("w-any")
            self.assertEqual(ctx.exception.code, grpc.StatusCode.PERMISSION_DENIED)
        with ranksweep.Client(addr=self.cluster.addr, token=admin) as ops:
            with self.assertRaises(RanksweepError) as ctx:
                ops.quarantine("w-any")  # allowed; no such worker
            self.assertEqual(ctx.exception.code, grpc.StatusCode.NOT_FOUND)

    def test_tls(self):
        # A self-signed certificate for 127.0.0.1 is its own CA (docs/SECURITY.md).
        cert = os.path.join(self.cluster.dir.name, "server.pem")
        key = os.path.join(self.cluster.dir.name, "server.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                        "-keyout", key, "-out", cert], capture_output=True, check=True,
                       timeout=60)
        self.cluster.server_flags = [f"--tls_cert={cert}", f"--tls_key={key}"]
        self.cluster.start(worker=False)
        with ranksweep.Client(addr=self.cluster.addr, token=self.token, tls_ca=cert) as tls:
            self.assertEqual(len(tls.list()), 0)
            self.assertEqual(len(tls.workers()), 0)
        with ranksweep.Client(addr=self.cluster.addr, token=self.token, timeout=5) as plain:
            with self.assertRaises(RanksweepError) as ctx:
                plain.list()
            self.assertEqual(ctx.exception.code, grpc.StatusCode.UNAVAILABLE)


if __name__ == "__main__":
    unittest.main()
