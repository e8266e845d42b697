"""DataFrames from fixed ranksweep.v1 replies, without a server."""

import math
import unittest

import grpc
import numpy as np
import pandas as pd

from ranksweep import RanksweepError, frames
from ranksweep.v1 import ranksweep_pb2 as pb

RESULT_DTYPES = {
    "sweep_id": "object", "cell_id": "int64", "head": "object", "head_index": "int64",
    "rank": "Int64", "seed": "uint64", "state": "object",
    "train_sequences": "Int64", "train_position_accuracy": "float64",
    "train_exact_accuracy": "float64", "train_error": "float64", "train_max_abs_error": "float64",
    "test_sequences": "Int64", "test_position_accuracy": "float64",
    "test_exact_accuracy": "float64", "test_error": "float64", "test_max_abs_error": "float64",
    "final_loss": "float64", "steps": "Int64", "wall_seconds": "float64", "device": "object",
    "failure": "object", "worker_id": "object", "build_id": "object",
    "torch_version": "object", "cuda_version": "object", "attempt": "int64",
    "lease_id": "int64", "finished": "datetime64[ns, UTC]", "cached_from_cell_id": "Int64",
    "distinct_queries": "Int64", "rank_lower_bound": "Int64", "rank_upper_bound": "Int64",
    "first_exact_step": "Int64", "recipe": "int64",
}

VERSION = pb.VersionManifest(build_id="0.1.0+abc", torch_version="1.13.1")
FACTS = pb.DatasetFacts(train_sequences=64, distinct_queries=4, rank_lower_bound=3,
                        rank_upper_bound=4)


def split(sequences, error, exact, position, max_abs):
    return pb.SplitMetrics(sequences=sequences, error=error, exact_accuracy=exact,
                           position_accuracy=position, max_abs_error=max_abs)


def witness_rows():
    """Three cells of a dataset without a test split: a done kernel cell, a
    done softmax cell (rank 0 on the wire) and a failed kernel cell."""
    def done(cell, head, index, rank, seed, train, loss, lease, cached=0):
        return pb.ResultRow(
            sweep_id="s1", cell_id=cell, head=head, head_index=index, rank=rank, seed=seed,
            state=pb.CELL_STATE_DONE,
            result=pb.SeedResult(seed=seed, train=train, test=pb.SplitMetrics(error=1.0),
                                 final_loss=loss, steps=300, wall_seconds=0.5, device="cpu",
                                 facts=FACTS),
            worker_id="w-1", worker_version=VERSION, attempt=1, lease_id=lease,
            finished_unix_ms=1764590400123, cached_from_cell_id=cached)
    return [
        done(1, "kernel/elu1", 0, 1, 0, split(64, 0.25, 0.75, 0.875, 0.0), 0.125, 11),
        done(2, "softmax", 1, 0, 0, split(64, 0.0, 1.0, 1.0, 0.0), 0.0625, 12, cached=7),
        pb.ResultRow(sweep_id="s1", cell_id=3, head="kernel/elu1", head_index=0, rank=4,
                     seed=1, state=pb.CELL_STATE_FAILED, failure="out of memory",
                     worker_id="w-1", worker_version=VERSION, attempt=3, lease_id=13,
                     finished_unix_ms=1764590400456),
    ]


def as_columns(rows):
    """The rows as the coordinator sends them with columns = true."""
    c = pb.ResultColumns(sweep_id="s1", heads=["kernel/elu1", "softmax"], workers=["w-1"],
                         worker_versions=[VERSION], devices=["", "cpu"],
                         facts_table=[pb.DatasetFacts(), FACTS])
    for i, r in enumerate(rows):
        done = r.state in (pb.CELL_STATE_DONE, pb.CELL_STATE_INVALID)
        c.cell_id.append(r.cell_id)
        c.head_index.append(r.head_index)
        c.rank.append(r.rank)
        c.seed.append(r.seed)
        c.state.append(r.state)
        c.attempt.append(r.attempt)
        c.lease_id.append(r.lease_id)
        c.finished_unix_ms.append(r.finished_unix_ms)
        c.cached_from_cell_id.append(r.cached_from_cell_id)
        c.worker.append(0)
        c.worker_version.append(0)
        c.device.append(1 if done else 0)
        c.facts.append(1 if done else 0)
        if r.failure:
            c.failure_row.append(i)
            c.failure.append(r.failure)
        t = r.result.train
        c.train_sequences.append(t.sequences)
        c.train_error.append(t.error if done else 1.0)
        c.train_exact_accuracy.append(t.exact_accuracy)
        c.train_position_accuracy.append(t.position_accuracy)
        c.final_loss.append(r.result.final_loss)
        c.steps.append(r.result.steps)
        c.wall_seconds.append(r.result.wall_seconds)
    # Every row's max_abs_error is 0 and there is no test split: those lists
    # stay empty, as the coordinator sends them; so do the recipes when all
    # are 0 and a metric no row has.
    if any(r.recipe for r in rows):
        c.recipe.extend(r.recipe for r in rows)
    if any(r.result.HasField("first_exact_step") for r in rows):
        m = c.metrics.add(name="first_exact_step")
        for i, r in enumerate(rows):
            m.values.append(r.result.first_exact_step)
            if not r.result.HasField("first_exact_step"):
                m.missing_rows.append(i)
    return pb.QueryResultsResponse(columns=c)


class ResultsFrameTest(unittest.TestCase):
    def test_rows_reply(self):
        df = frames.results_frame([pb.QueryResultsResponse(rows=witness_rows())])
        self.assertEqual(list(df.columns), list(frames.RESULT_COLUMNS))
        self.assertEqual({c: str(t) for c, t in df.dtypes.items()}, RESULT_DTYPES)
        self.assertEqual(len(df), 3)
        self.assertEqual(list(df["head"]), ["kernel/elu1", "softmax", "kernel/elu1"])
        self.assertEqual(list(df["state"]), ["DONE", "DONE", "FAILED"])
        # Softmax has no rank: <NA>, never 0.
        self.assertEqual(df["rank"].tolist(), [1, pd.NA, 4])
        self.assertEqual(df["train_error"].tolist()[:2], [0.25, 0.0])
        self.assertTrue(math.isnan(df["train_error"][2]))
        # A done cell's max_abs_error of 0 is a value, not a missing one.
        self.assertEqual(df["train_max_abs_error"].tolist()[:2], [0.0, 0.0])
        # No test split: every test column is missing, never 1.0 or 0.
        for c in ("test_error", "test_exact_accuracy", "test_position_accuracy",
                  "test_max_abs_error"):
            self.assertTrue(df[c].isna().all(), c)
        self.assertTrue(df["test_sequences"].isna().all())
        self.assertEqual(df["steps"].tolist(), [300, 300, pd.NA])
        self.assertEqual(df["device"].tolist(), ["cpu", "cpu", None])
        self.assertEqual(df["failure"].tolist(), [None, None, "out of memory"])
        self.assertEqual(df["cuda_version"].tolist(), [None, None, None])
        self.assertEqual(df["cached_from_cell_id"].tolist(), [pd.NA, 7, pd.NA])
        self.assertEqual(df["rank_lower_bound"].tolist(), [3, 3, pd.NA])
        self.assertEqual(df["finished"][0],
                         pd.Timestamp("2025-12-01 12:00:00.123", tz="UTC"))
        self.assertEqual(df["seed"].tolist(), [0, 0, 1])

    def test_columns_reply_reads_the_same_as_rows(self):
        rows = witness_rows()
        want = frames.results_frame([pb.QueryResultsResponse(rows=rows)])
        got = frames.results_frame([as_columns(rows)])
        pd.testing.assert_frame_equal(got, want)
        # Pages concatenate in order.
        paged = frames.results_frame([as_columns(rows[:2]), as_columns(rows[2:])])
        pd.testing.assert_frame_equal(paged, want)

    def test_columns_that_do_not_fit_together_are_an_error(self):
        reply = as_columns(witness_rows())
        del reply.columns.rank[-1]
        with self.assertRaises(RanksweepError) as ctx:
            frames.results_frame([reply])
        self.assertEqual(ctx.exception.code, grpc.StatusCode.INTERNAL)
        self.assertEqual(ctx.exception.message,
                         "QueryResults reply: columns.rank: 2 values for 3 rows")
        reply = as_columns(witness_rows())
        reply.columns.head_index[0] = 5
        with self.assertRaises(RanksweepError) as ctx:
            frames.results_frame([reply])
        self.assertEqual(ctx.exception.code, grpc.StatusCode.INTERNAL)

    def test_an_invalidated_row_keeps_its_metrics_and_note(self):
        # What QueryResults state INVALID returns after a quarantine: the
        # result as it was stored, who invalidated it in `failure`.
        note = ("invalidated 2026-12-01T14:00:00Z by local: quarantine 1 of worker w-1")
        rows = witness_rows()
        bad = pb.ResultRow()
        bad.CopyFrom(rows[0])
        bad.state = pb.CELL_STATE_INVALID
        bad.failure = note
        for reply in (pb.QueryResultsResponse(rows=rows[:1] + [bad]),
                      as_columns(rows[:1] + [bad])):
            df = frames.results_frame([reply])
            self.assertEqual({c: str(t) for c, t in df.dtypes.items()}, RESULT_DTYPES)
            self.assertEqual(df["state"].tolist(), ["DONE", "INVALID"])
            self.assertEqual(df["cell_id"].tolist(), [1, 1])
            self.assertEqual(df["train_error"].tolist(), [0.25, 0.25])
            self.assertEqual(df["train_sequences"].tolist(), [64, 64])
            self.assertEqual(df["steps"].tolist(), [300, 300])
            self.assertEqual(df["device"].tolist(), ["cpu", "cpu"])
            self.assertEqual(df["rank_upper_bound"].tolist(), [4, 4])
            self.assertEqual(df["failure"].tolist(), [None, note])
            self.assertTrue(df["test_error"].isna().all())

    def test_test_split_values_are_kept(self):
        row = pb.ResultRow(
            sweep_id="p", cell_id=1, head="kernel/elu1", rank=2, state=pb.CELL_STATE_DONE,
            result=pb.SeedResult(train=split(40, 0.0, 1.0, 1.0, 0.25),
                                 test=split(20, 0.5, 0.5, 0.75, 0.75), steps=10))
        df = frames.results_frame([pb.QueryResultsResponse(rows=[row])])
        self.assertEqual(df["test_sequences"].tolist(), [20])
        self.assertEqual(df.loc[0, ["test_error", "test_exact_accuracy",
                                    "test_position_accuracy", "test_max_abs_error"]].tolist(),
                         [0.5, 0.5, 0.75, 0.75])
        self.assertEqual(df["rank_upper_bound"].tolist(), [pd.NA])  # no bound: <NA>

    def test_recipes_and_first_exact_step(self):
        rows = witness_rows()
        rows[1].result.first_exact_step = 150  # the softmax cell got exact at step 150
        rows[1].recipe = 3
        rows[2].recipe = 1
        spec = pb.SweepSpec(axes=[pb.SweepAxis(name="lr", values=[0.01, 0.003]),
                                  pb.SweepAxis(name="max_steps", values=[100, 200])])
        want = frames.results_frame([pb.QueryResultsResponse(rows=rows)], spec)
        self.assertEqual(list(want.columns), list(frames.RESULT_COLUMNS) + ["lr", "max_steps"])
        self.assertEqual(want["first_exact_step"].tolist(), [pd.NA, 150, pd.NA])
        self.assertEqual(want["recipe"].tolist(), [0, 3, 1])
        # Recipe 3 is (lr 0.003, max_steps 200), the first axis slowest.
        self.assertEqual(want["lr"].tolist(), [0.01, 0.003, 0.01])
        self.assertEqual(str(want["lr"].dtype), "float64")
        self.assertEqual(want["max_steps"].tolist(), [100, 200, 200])
        self.assertEqual(str(want["max_steps"].dtype), "Int64")
        got = frames.results_frame([as_columns(rows)], spec)
        pd.testing.assert_frame_equal(got, want)
        # Without the spec: the recipe index alone.
        self.assertEqual(list(frames.results_frame([as_columns(rows)]).columns),
                         list(frames.RESULT_COLUMNS))
        self.assertEqual([frames.recipe_label(spec, k) for k in range(4)],
                         ["lr=0.01 max_steps=100", "lr=0.01 max_steps=200",
                          "lr=0.003 max_steps=100", "lr=0.003 max_steps=200"])
        self.assertEqual(frames.recipe_label(pb.SweepSpec(), 0), "")
        self.assertEqual(frames.recipe_label(spec, 4), "")  # out of range
        self.assertEqual(frames.recipe_values(spec),
                         [[0.01, 100], [0.01, 200], [0.003, 100], [0.003, 200]])
        # A spec dict (Client.spec) is not parsed here: the message is the
        # spec (Client.spec_proto).
        as_dict = {"name": "x", "train": {"lr": [0.01, 0.003], "max_steps": [100, 200]}}
        for call in (lambda: frames.recipe_label(as_dict, 0),
                     lambda: frames.recipe_values(as_dict)):
            with self.assertRaises(TypeError) as ctx:
                call()
            self.assertIn("Client.spec_proto(sweep_id)", str(ctx.exception))
        with self.assertRaises(TypeError):
            frames.recipe_label("lr=0.01", 0)
        # Integer and real axes, and a split axis by name, in labels.
        mixed = pb.SweepSpec(axes=[pb.SweepAxis(name="m", values=[4, 6]),
                                   pb.SweepAxis(name="split", values=[1]),
                                   pb.SweepAxis(name="hard_share", values=[0, 0.25])])
        self.assertEqual([frames.recipe_label(mixed, k) for k in range(4)],
                         ["m=4 split=sequences hard_share=0.0",
                          "m=4 split=sequences hard_share=0.25",
                          "m=6 split=sequences hard_share=0.0",
                          "m=6 split=sequences hard_share=0.25"])
        # The schedule axis reads by name in labels and columns.
        named = pb.SweepSpec()
        named.axes.add(name="schedule", values=[0, 1])
        self.assertEqual([frames.recipe_label(named, k) for k in range(2)],
                         ["schedule=constant", "schedule=cosine"])
        data = {}
        frames._add_axis_columns(data, [1, 0, 5], named)
        self.assertEqual(data["schedule"], ["cosine", "constant", None])

    def test_the_optional_metrics_come_from_the_coordinators_table(self):
        # A coordinator older than the table: the scalar SeedResult fields
        # with presence, typed by their field.
        self.assertEqual(frames.RESULT_COLUMNS[-2:], ("first_exact_step", "recipe"))
        self.assertEqual(RESULT_DTYPES["first_exact_step"], "Int64")
        # A reply with the table: one column per metric it lists, typed as it
        # says, including one this package has never heard of, in the table's
        # order; values from the columns sent, <NA>/NaN where missing.
        rows = witness_rows()
        reply = as_columns(rows)
        c = reply.columns
        c.metric_table.add(name="first_exact_step", integer=True, label="First exact step")
        c.metric_table.add(name="final_test_loss", label="Final test loss", test_split=True)
        c.metric_table.add(name="made_up_steps", integer=True)
        loss = c.metrics.add(name="final_test_loss", values=[0.5, 0.0, 0.0],
                             missing_rows=[1, 2])
        made_up = c.metrics.add(name="made_up_steps", values=[0, 40, 0], missing_rows=[0, 2])
        self.assertEqual(len(loss.values) + len(made_up.values), 6)
        df = frames.results_frame([reply])
        self.assertEqual(frames.result_columns([reply])[-4:],
                         ["first_exact_step", "final_test_loss", "made_up_steps", "recipe"])
        self.assertEqual(list(df.columns), frames.result_columns([reply]))
        self.assertEqual(str(df["final_test_loss"].dtype), "float64")
        self.assertEqual(str(df["made_up_steps"].dtype), "Int64")
        self.assertEqual(df["final_test_loss"].tolist()[0], 0.5)
        self.assertTrue(math.isnan(df["final_test_loss"][1]))
        self.assertEqual(df["made_up_steps"].tolist(), [pd.NA, 40, pd.NA])
        # A metric a row sends that the table lacks is not a column.
        c.metrics.add(name="not_in_the_table", values=[1, 1, 1])
        self.assertNotIn("not_in_the_table", frames.results_frame([reply]).columns)
        # Rows (a coordinator that predates columns): SeedResult.metrics,
        # else the metric's own field.
        rows[0].result.metrics["first_exact_step"] = 60
        rows[1].result.first_exact_step = 150
        df = frames.results_frame([pb.QueryResultsResponse(rows=rows)])
        self.assertEqual(df["first_exact_step"].tolist(), [60, 150, pd.NA])

    def test_the_built_in_metrics_come_from_the_coordinators_table(self):
        # A coordinator older than the table: the ResultColumns lists of a
        # split's SplitMetrics fields and SeedResult's numbers, in field
        # order, as the CLI's CSV has them.
        self.assertEqual(frames.RESULT_COLUMNS[7:20], (
            "train_sequences", "train_position_accuracy", "train_exact_accuracy", "train_error",
            "train_max_abs_error", "test_sequences", "test_position_accuracy",
            "test_exact_accuracy", "test_error", "test_max_abs_error", "final_loss", "steps",
            "wall_seconds"))
        # A reply with the table: one column per built-in it lists, in its
        # order, typed as it says, an empty list read as its empty value; a
        # built-in newer than this package (no list of its name here) is a
        # column of missing values, never dropped.
        rows = witness_rows()
        reply = as_columns(rows)
        c = reply.columns
        c.built_in_table.add(name="steps", field="steps", integer=True)
        c.built_in_table.add(name="train_error", field="error", empty=1.0)
        c.built_in_table.add(name="test_error", field="error", empty=1.0, test_split=True)
        c.built_in_table.add(name="test_sequences", field="sequences", integer=True,
                             test_split=True)
        c.built_in_table.add(name="train_made_up", field="made_up")
        df = frames.results_frame([reply])
        self.assertEqual(frames.result_columns([reply])[:13],
                         ["sweep_id", "cell_id", "head", "head_index", "rank", "seed", "state",
                          "steps", "train_error", "test_error", "test_sequences",
                          "train_made_up", "device"])
        self.assertEqual(list(df.columns), frames.result_columns([reply]))
        self.assertNotIn("final_loss", df.columns)
        self.assertEqual(df["steps"].tolist(), [300, 300, pd.NA])
        self.assertEqual(df["train_error"].tolist()[:2], [0.25, 0.0])
        self.assertTrue(math.isnan(df["train_error"][2]))  # not done
        self.assertTrue(df["test_error"].isna().all())  # no test split
        self.assertTrue(df["test_sequences"].isna().all())
        self.assertEqual(str(df["train_made_up"].dtype), "float64")
        self.assertTrue(df["train_made_up"].isna().all())
        # Rows (a coordinator that predates columns) read the same fields.
        want = frames.results_frame([pb.QueryResultsResponse(rows=rows)])
        got = frames.results_frame([as_columns(rows)])
        pd.testing.assert_frame_equal(got, want)

    def test_no_rows(self):
        df = frames.results_frame([pb.QueryResultsResponse()])
        self.assertEqual(len(df), 0)
        self.assertEqual({c: str(t) for c, t in df.dtypes.items()}, RESULT_DTYPES)


def aggregate(mean, std=0.0, lo=None, hi=None, ci95=0.0):
    return pb.Aggregate(mean=mean, std=std, min=mean if lo is None else lo,
                        max=mean if hi is None else hi, ci95=ci95)


def grouped_reply(test=False):
    kernel = pb.ResultGroup(head="kernel/elu1", head_index=0, rank=1, n=3, expected=3,
                            train_error=aggregate(0.5, 0.25, 0.25, 0.75, 0.62),
                            test_error=aggregate(1.0),
                            train_exact_accuracy=aggregate(0.5, 0.25, 0.25, 0.75, 0.62),
                            train_position_accuracy=aggregate(0.75, 0.125, 0.5, 0.875, 0.31))
    one = pb.ResultGroup(head="kernel/elu1", head_index=0, rank=8, n=1, expected=3,
                         train_error=aggregate(0.0), test_error=aggregate(1.0),
                         train_exact_accuracy=aggregate(1.0),
                         train_position_accuracy=aggregate(1.0), exact_seeds=1,
                         missing_seeds=[1, 2])
    none = pb.ResultGroup(head="softmax", head_index=1, rank=0, n=0, expected=3,
                          missing_seeds=[0, 1, 2])
    heads = [
        pb.HeadSummary(head="kernel/elu1", head_index=0, has_rank=True,
                       transition_defined=False, reason="rank 8: 1/3 seeds done, all exact",
                       has_test_split=test, test_reason="no rank exact on every seed"
                       if test else ""),
        pb.HeadSummary(head="softmax", head_index=1, has_rank=False, reason="no seed done",
                       has_test_split=test),
    ]
    return pb.QueryResultsResponse(groups=[kernel, one, none], heads=heads, facts=FACTS)


class GroupsFrameTest(unittest.TestCase):
    def test_the_groups_optional_metrics_are_columns(self):
        reply = grouped_reply()
        kernel, one, none = reply.groups
        kernel.metrics.add(name="first_exact_step", n=2,
                           aggregate=aggregate(150.0, 50.0, 100.0, 200.0, 449.2))
        kernel.metrics.add(name="final_test_loss", n=0)
        one.metrics.add(name="first_exact_step", n=1, aggregate=aggregate(40.0))
        one.metrics.add(name="final_test_loss", n=0)
        none.metrics.add(name="first_exact_step", n=0)
        none.metrics.add(name="final_test_loss", n=0)
        df = frames.groups_frame(reply)
        names = ["first_exact_step", "final_test_loss"]
        self.assertEqual(list(df.columns), frames.group_columns(None, names))
        self.assertEqual(list(df.columns)[-12:],
                         [f"{m}_{f}" for m in names
                          for f in ("n", "mean", "std", "min", "max", "ci95")])
        self.assertEqual(df["first_exact_step_n"].tolist(), [2, 1, 0])
        self.assertEqual(df.loc[0, ["first_exact_step_mean", "first_exact_step_std",
                                    "first_exact_step_min", "first_exact_step_max"]].tolist(),
                         [150.0, 50.0, 100.0, 200.0])
        self.assertEqual(df.loc[1, "first_exact_step_mean"], 40.0)
        self.assertTrue(math.isnan(df.loc[1, "first_exact_step_std"]))  # one seed
        self.assertTrue(math.isnan(df.loc[2, "first_exact_step_mean"]))  # none
        self.assertTrue(df["final_test_loss_mean"].isna().all())
        self.assertEqual(df["final_test_loss_n"].tolist(), [0, 0, 0])

    def test_groups_without_a_test_split(self):
        df = frames.groups_frame(grouped_reply())
        self.assertEqual(list(df.columns), frames.group_columns())
        self.assertEqual(len(df), 3)
        self.assertEqual(str(df["rank"].dtype), "Int64")
        self.assertEqual(df["rank"].tolist(), [1, 8, pd.NA])
        self.assertEqual(df["n"].tolist(), [3, 1, 0])
        self.assertEqual(df["missing_seeds"].tolist(), [[], [1, 2], [0, 1, 2]])
        self.assertEqual(df.loc[0, ["train_error_mean", "train_error_std", "train_error_min",
                                    "train_error_max", "train_error_ci95"]].tolist(),
                         [0.5, 0.25, 0.25, 0.75, 0.62])
        # One done seed: a mean, but no std or interval.
        self.assertEqual(df.loc[1, "train_error_mean"], 0.0)
        self.assertTrue(math.isnan(df.loc[1, "train_error_std"]))
        self.assertTrue(math.isnan(df.loc[1, "train_error_ci95"]))
        # No done seed: nothing at all.
        self.assertTrue(df.loc[2, [c for c in df.columns if c.startswith("train_")]]
                        .isna().all())
        # No test split: the test columns are missing, not the wire's 1.0 or 0.
        self.assertTrue(df[[c for c in df.columns if c.startswith("test_error")]]
                        .isna().all().all())
        self.assertEqual(str(df["test_exact_seeds"].dtype), "Int64")
        self.assertTrue(df["test_exact_seeds"].isna().all())
        for c in frames.group_columns():
            if c.endswith(tuple(frames.AGGREGATE_FIELDS)):
                self.assertEqual(df[c].dtype, np.float64, c)

    def test_groups_with_a_test_split(self):
        df = frames.groups_frame(grouped_reply(test=True))
        self.assertEqual(df["test_error_mean"].tolist()[:2], [1.0, 1.0])
        self.assertEqual(df["test_exact_seeds"].tolist(), [0, 0, 0])

    def test_groups_with_recipes_and_verdicts(self):
        reply = grouped_reply()
        reply.groups[0].recipe = 1
        reply.groups[0].verdict = pb.CRITERION_VERDICT_NOT_MET
        reply.groups[1].verdict = pb.CRITERION_VERDICT_MEETS
        reply.groups[2].verdict = pb.CRITERION_VERDICT_UNDECIDED
        spec = pb.SweepSpec(axes=[pb.SweepAxis(name="lr", values=[0.01, 0.003])])
        df = frames.groups_frame(reply, spec)
        self.assertEqual(list(df.columns), frames.group_columns(spec))
        self.assertEqual(list(df.columns[:6]),
                         ["head", "head_index", "rank", "recipe", "lr", "n"])
        self.assertEqual(df["recipe"].tolist(), [1, 0, 0])
        self.assertEqual(df["lr"].tolist(), [0.003, 0.01, 0.01])
        self.assertEqual(df["verdict"].tolist(), ["no", "yes", "undecided"])
        self.assertEqual(df["test_verdict"].tolist(), [None, None, None])  # no test split

    def test_summary_with_criterion_recipes_and_no_bound(self):
        reply = grouped_reply()
        reply.criterion = "seeds:1"
        reply.recipe_labels[0] = "lr=0.01"
        reply.recipe_labels[1] = "lr=0.003"
        kernel = reply.heads[0]
        kernel.transition_defined = True
        kernel.transition_rank = 8
        kernel.ranks.add(rank=1, verdict=pb.CRITERION_VERDICT_NOT_MET)
        kernel.ranks.add(rank=8, verdict=pb.CRITERION_VERDICT_MEETS, recipes_meeting=[0, 1])
        reply.heads[1].no_bound = "softmax"
        df = frames.summary_frame(reply)
        self.assertEqual(df["criterion"].tolist(), ["seeds:1", "seeds:1"])
        self.assertEqual(df["recipes_meeting"].tolist(), [["lr=0.01", "lr=0.003"], []])
        self.assertEqual(df["test_recipes_meeting"].tolist(), [None, None])
        self.assertEqual(df["no_bound"].tolist(), [None, "softmax"])
        # The bounds only beside the heads they apply to.
        self.assertEqual(df["rank_lower_bound"].tolist(), [3, pd.NA])
        self.assertEqual(df["rank_upper_bound"].tolist(), [4, pd.NA])

    def test_summary(self):
        df = frames.summary_frame(grouped_reply())
        self.assertEqual(list(df.columns), list(frames.SUMMARY_COLUMNS))
        self.assertEqual(df["head"].tolist(), ["kernel/elu1", "softmax"])
        self.assertEqual(df["has_rank"].tolist(), [True, False])
        self.assertEqual(df["transition_rank"].tolist(), [pd.NA, pd.NA])
        self.assertEqual(df["reason"].tolist(), ["rank 8: 1/3 seeds done, all exact",
                                                 "no seed done"])
        self.assertEqual(df["test_reason"].tolist(), [None, None])
        self.assertEqual(df["rank_lower_bound"].tolist(), [3, 3])
        self.assertEqual(df["rank_upper_bound"].tolist(), [4, 4])
        self.assertEqual(df["no_bound"].tolist(), [None, None])
        self.assertEqual(df["criterion"].tolist(), [None, None])  # an older coordinator
        reply = grouped_reply(test=True)
        reply.heads[0].transition_defined = True
        reply.heads[0].transition_rank = 8
        reply.heads[0].caveat = "loss ce"
        reply.ClearField("facts")
        df = frames.summary_frame(reply)
        self.assertEqual(df["transition_rank"].tolist(), [8, pd.NA])
        self.assertEqual(str(df["transition_rank"].dtype), "Int64")
        self.assertEqual(df["test_transition_rank"].tolist(), [pd.NA, pd.NA])
        self.assertEqual(df["test_reason"].tolist(), ["no rank exact on every seed", ""])
        self.assertEqual(df["caveat"].tolist(), ["loss ce", None])
        self.assertEqual(df["rank_lower_bound"].tolist(), [pd.NA, pd.NA])


class SweepsAndWorkersTest(unittest.TestCase):
    def test_sweeps(self):
        running = pb.SweepInfo(sweep_id="a", name="demo", owner="local",
                               state=pb.SWEEP_STATE_RUNNING,
                               counts=pb.CellCounts(total=9, pending=4, leased=2, done=3),
                               created_unix_ms=1764590400000, grid_cells=9,
                               mean_cell_seconds=1.5)
        fresh = pb.SweepInfo(sweep_id="b", name="new", state=pb.SWEEP_STATE_DONE,
                             counts=pb.CellCounts(total=2, done=1, pruned=1), cached_cells=2,
                             created_unix_ms=1764590400000, finished_unix_ms=1764590401000)
        df = frames.sweeps_frame([running, fresh])
        self.assertEqual(list(df.columns), list(frames.SWEEP_COLUMNS))
        self.assertEqual(df["pruned"].tolist(), [0, 1])
        self.assertEqual(df["state"].tolist(), ["RUNNING", "DONE"])
        self.assertEqual(df["leased"].tolist(), [2, 0])
        self.assertTrue(pd.isna(df["finished"][0]))
        self.assertEqual(df["finished"][1], pd.Timestamp("2025-12-01 12:00:01", tz="UTC"))
        self.assertEqual(df["mean_cell_seconds"][0], 1.5)
        self.assertTrue(math.isnan(df["mean_cell_seconds"][1]))
        self.assertEqual(df["owner"].tolist(), ["local", None])
        self.assertEqual(len(frames.sweeps_frame([])), 0)

    def test_workers(self):
        w = pb.WorkerInfo(worker_id="w-1", hostname="box", device="cpu", slots=2,
                          version=VERSION, registered_unix_ms=1764590400000,
                          last_seen_unix_ms=1764590460000, completed_cells=9, alive=True)
        df = frames.workers_frame([w])
        self.assertEqual(list(df.columns), list(frames.WORKER_COLUMNS))
        self.assertEqual(df.loc[0, ["worker_id", "device", "slots", "completed_cells",
                                    "alive"]].tolist(), ["w-1", "cpu", 2, 9, True])
        self.assertTrue(pd.isna(df["memory_bytes"][0]))
        self.assertIsNone(df["cuda_version"][0])
        self.assertIsNone(df["device_name"][0])
        self.assertEqual(df["last_seen"][0], pd.Timestamp("2025-12-01 12:01:00", tz="UTC"))

    def test_progress(self):
        event = pb.SweepEvent(
            sweep=pb.SweepInfo(sweep_id="a", name="demo", state=pb.SWEEP_STATE_FAILED,
                               counts=pb.CellCounts(total=3, done=2, failed=1),
                               recent_failures=["boom"]),
            message="cell kernel/elu1 r=8 seed=2 failed")
        p = frames.progress_from_event(event)
        self.assertEqual((p.state, p.total, p.done, p.failed, p.running), ("FAILED", 3, 2, 1, 0))
        self.assertTrue(p.ended)
        self.assertEqual(p.recent_failures, ("boom",))
        self.assertTrue(math.isnan(p.mean_cell_seconds))
        event.sweep.state = pb.SWEEP_STATE_RUNNING
        self.assertFalse(frames.progress_from_event(event).ended)


if __name__ == "__main__":
    unittest.main()
