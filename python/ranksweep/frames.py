"""ranksweep.v1 replies as pandas DataFrames, and watch events as Progress.

Pure functions of the reply messages (no network), so every frame is tested
from fixed replies. The conventions, the same in every frame:

- A value that does not exist is missing, never a stand-in number: metrics
  of a row that is not DONE (or INVALID: a result a quarantine invalidated
  keeps its metrics as they were stored), test metrics of a dataset without
  a test split,
  std and ci95 of a group with fewer than two done seeds, times that have not
  happened. Floats hold NaN; integer columns are pandas' nullable "Int64"
  and hold <NA>; strings hold None. On the wire these are 0 or 1.0.
- `rank` is "Int64": <NA> for heads without a rank (softmax, the exact
  constructions), whose cells carry rank 0 on the wire.
- Recipes: every results and groups frame has `recipe` (the index of the
  cell's recipe, 0 for a sweep without axes) and, when the sweep's spec is
  given and has recipe axes, one column per axis named as the axis ("lr",
  "max_steps") holding the recipe's value, as the CLI's CSV does: "Int64"
  for integer axes, float64 for lr and weight_decay.
- Heads are labelled as the CLI prints them ("kernel/elu1", "softmax");
  states are plain names ("DONE", "RUNNING"); times are UTC Timestamps.

Thread-safety: functions without shared state.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import grpc
import numpy as np
import pandas as pd
from google.protobuf.descriptor import FieldDescriptor

from ranksweep.errors import RanksweepError
from ranksweep.v1 import ranksweep_pb2 as pb

# Column order of results(): the CLI's CSV columns (the cell, the built-in
# metrics in the coordinator's order, where and how it ran), then what the
# CSV leaves out; the optional metrics and the recipe follow.
_CELL_COLUMNS: Tuple[str, ...] = (
    "sweep_id", "cell_id", "head", "head_index", "rank", "seed", "state")
_RUN_COLUMNS: Tuple[str, ...] = (
    "device", "failure", "worker_id", "build_id", "torch_version", "cuda_version", "attempt",
    "lease_id", "finished", "cached_from_cell_id",
    "distinct_queries", "rank_lower_bound", "rank_upper_bound",
)
_VERSION_FIELDS = ("build_id", "torch_version", "cuda_version")
_FACT_FIELDS = ("distinct_queries", "rank_lower_bound", "rank_upper_bound")
# The groups' aggregates: the Aggregate fields of a ResultGroup, in order.
AGGREGATES: Tuple[str, ...] = tuple(
    f.name for f in pb.ResultGroup.DESCRIPTOR.fields
    if f.message_type is pb.Aggregate.DESCRIPTOR)
AGGREGATE_FIELDS: Tuple[str, ...] = tuple(f.name for f in pb.Aggregate.DESCRIPTOR.fields)

_UTC = pd.DatetimeTZDtype(tz="UTC")
_INTEGER_TYPES = (FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64,
                  FieldDescriptor.CPPTYPE_UINT32, FieldDescriptor.CPPTYPE_UINT64)

# The built-in metrics (what every done row has: train_error ...
# wall_seconds) are the coordinator's too: every reply in columns carries
# their table (ResultColumns.built_in_table: name, type, split, the
# SplitMetrics or SeedResult field, the empty value), and each is a column
# of results(), in its order, read from the ResultColumns list of its name.
# A coordinator older than that table sent the ResultColumns lists named as
# a split's SplitMetrics field ("train_error") or as a number of SeedResult
# ("final_loss"; the seed is the row's identity), in field order; an error
# is 1 where a row has none, the others 0 (the proto's words).
def _legacy_built_ins() -> Tuple[pb.MetricInfo, ...]:
    split_fields = {f.name for f in pb.SplitMetrics.DESCRIPTOR.fields}
    seed_fields = {f.name for f in pb.SeedResult.DESCRIPTOR.fields
                   if f.message_type is None and not f.has_presence and not f.containing_oneof
                   and f.cpp_type != f.CPPTYPE_STRING and f.name != "seed"}
    out = []
    for f in pb.ResultColumns.DESCRIPTOR.fields:
        split, _, rest = f.name.partition("_")
        field = rest if split in ("train", "test") and rest in split_fields else (
            f.name if f.name in seed_fields else None)
        if field is not None:
            out.append(pb.MetricInfo(name=f.name, integer=f.cpp_type in _INTEGER_TYPES,
                                     test_split=split == "test", field=field,
                                     empty=1.0 if field == "error" else 0.0))
    return tuple(out)


_LEGACY_BUILT_INS = _legacy_built_ins()

# The optional metrics are the coordinator's: every reply in columns carries
# its table (ResultColumns.metric_table: name and type, in order), and each
# is a column of results(), with no list here. From a coordinator older than
# the table, they are the scalar fields of SeedResult with presence (an
# `optional` in the proto), read off the message's descriptor.
_LEGACY_METRICS: Tuple[Tuple[str, bool], ...] = tuple(
    (f.name, f.cpp_type in _INTEGER_TYPES)
    for f in pb.SeedResult.DESCRIPTOR.fields if f.has_presence and f.message_type is None)
# The columns of results() against a coordinator older than the metric
# tables: the cell, the built-ins, the run, the optional metrics, the recipe
# (as the CLI's CSV ends). result_columns() gives a reply's.
RESULT_COLUMNS: Tuple[str, ...] = (
    _CELL_COLUMNS + tuple(m.name for m in _LEGACY_BUILT_INS) + _RUN_COLUMNS
    + tuple(name for name, _ in _LEGACY_METRICS) + ("recipe",))


def _metric_table(replies: Sequence[pb.QueryResultsResponse]) -> Tuple[Tuple[str, bool], ...]:
    """(name, integer) of each optional metric, in the coordinator's order."""
    for r in replies:
        if r.HasField("columns") and len(r.columns.metric_table):
            return tuple((m.name, m.integer) for m in r.columns.metric_table)
    return _LEGACY_METRICS


def _built_in_table(replies: Sequence[pb.QueryResultsResponse]) -> Tuple[pb.MetricInfo, ...]:
    """The built-in metrics, in the coordinator's order."""
    for r in replies:
        if r.HasField("columns") and len(r.columns.built_in_table):
            return tuple(r.columns.built_in_table)
    return _LEGACY_BUILT_INS


def _row_path(m: pb.MetricInfo) -> str:
    """Where built-in `m` sits in a ResultRow: "result.train.error" for
    train_error (the split is the name before its field), "result.steps"."""
    if m.name == m.field:
        return f"result.{m.field}"
    return f"result.{m.name[:-len(m.field) - 1]}.{m.field}"


def result_columns(replies: Sequence[pb.QueryResultsResponse]) -> List[str]:
    """The columns results_frame makes of `replies` (before the axis
    columns): the cell's, every built-in metric, where and how it ran,
    every optional metric the coordinator knows, then `recipe`."""
    return (list(_CELL_COLUMNS) + [m.name for m in _built_in_table(replies)]
            + list(_RUN_COLUMNS) + [name for name, _ in _metric_table(replies)] + ["recipe"])


# How axis values read, for display only (labels and axis columns); the
# coordinator names, parses and checks the axes. These must follow AxisNames()
# and AxisIsInteger() in common/spec/spec.h.
# A named axis holds the index of one of its names.
NAMED_AXES: Dict[str, Tuple[str, ...]] = {"schedule": ("constant", "cosine"),
                                          "split": ("tokens", "sequences")}
# Integer axes are shown without a point; the others are reals.
INTEGER_AXES = frozenset({"max_steps", "batch_size", "m", "weight", "num_queries", "pool_size",
                          "train_size", "test_size", "schedule", "warmup_steps", "split"})


def _proto(spec: pb.SweepSpec) -> pb.SweepSpec:
    """`spec` itself; a TypeError for anything but a SweepSpec (a dict of
    Client.spec() included: Client.spec_proto() gives the message)."""
    if isinstance(spec, Mapping):
        raise TypeError("a spec dict is not read here; pass the ranksweep.v1.SweepSpec "
                        "(Client.spec_proto(sweep_id), or Validation.spec_proto)")
    if not isinstance(spec, pb.SweepSpec):
        raise TypeError(f"spec must be a ranksweep.v1.SweepSpec, not {type(spec).__name__}")
    return spec


def recipe_values(spec: pb.SweepSpec) -> List[List[float]]:
    """The axes' values of every recipe of a sweep's spec (a SweepSpec, as
    Client.spec_proto returns it): [recipe][axis], recipes in cross-product
    order with the first axis slowest (RecipeValues in common/spec/spec.h).
    [[]] without axes. Raises TypeError for anything but a SweepSpec."""
    spec = _proto(spec)
    out: List[List[float]] = [[]]
    for axis in spec.axes:
        out = [values + [v] for values in out for v in axis.values]
    return out


def recipe_label(spec: pb.SweepSpec, recipe: int) -> str:
    """"lr=0.003 max_steps=4000" (integers without a point, reals in their
    shortest form, named axes by name), as the CLI labels recipe `recipe`
    of the SweepSpec `spec` (Client.spec_proto); "" without axes or for a
    recipe out of range. Raises TypeError for anything but a SweepSpec."""
    spec = _proto(spec)
    values = recipe_values(spec)
    if not spec.axes or not 0 <= recipe < len(values):
        return ""
    return " ".join(f"{a.name}={_axis_text(a.name, v)}"
                    for a, v in zip(spec.axes, values[recipe]))


def _axis_text(name: str, value: float) -> str:
    names = NAMED_AXES.get(name, ())
    if names and float(value).is_integer() and 0 <= int(value) < len(names):
        return names[int(value)]
    if name in INTEGER_AXES and float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def _add_axis_columns(data: Dict[str, Any], recipe_list: Sequence[int],
                      spec: Optional[pb.SweepSpec]) -> List[str]:
    """data["recipe"] and one column per axis of `spec` (None: none)."""
    recipes: Any = np.asarray(recipe_list, dtype=np.int64)
    data["recipe"] = recipes
    if spec is None:
        return []
    table = recipe_values(spec)
    valid: Any = (recipes >= 0) & (recipes < len(table))
    names = []
    for i, axis in enumerate(spec.axes):
        values: Any = np.array([table[r][i] if ok else 0.0 for r, ok in zip(recipes, valid)],
                          dtype=np.float64)
        if axis.name in NAMED_AXES:
            data[axis.name] = [_axis_text(axis.name, v) if ok else None
                               for v, ok in zip(values, valid)]
        elif axis.name in INTEGER_AXES:
            data[axis.name] = _ints(values.astype(np.int64), ~valid)
        else:
            data[axis.name] = np.where(valid, values, np.nan)
        names.append(axis.name)
    return names


def cell_state_name(value: int) -> str:
    """"DONE" for CELL_STATE_DONE; "UNSPECIFIED" for 0."""
    return pb.CellState.Name(value).replace("CELL_STATE_", "", 1)


def sweep_state_name(value: int) -> str:
    """"RUNNING" for SWEEP_STATE_RUNNING; "UNSPECIFIED" for 0."""
    return pb.SweepState.Name(value).replace("SWEEP_STATE_", "", 1)


def _ints(values: Any, missing: Any = None) -> Any:
    """An "Int64" array; `missing` is a boolean mask of <NA> entries."""
    values = np.asarray(values, dtype=np.int64)
    if missing is None:
        missing = np.zeros(len(values), dtype=bool)
    return pd.arrays.IntegerArray(values, np.asarray(missing, dtype=bool))


def _floats(values: Any, missing: Any) -> Any:
    values = np.asarray(values, dtype=np.float64)
    return np.where(np.asarray(missing, dtype=bool), np.nan, values)


def _times(unix_ms: Any) -> Any:
    """UTC Timestamps of Unix milliseconds; 0 (not yet) is NaT."""
    ms = np.asarray(unix_ms, dtype=np.int64)
    out = pd.Series(pd.NaT, index=range(len(ms)), dtype=_UTC)
    set_ = ms != 0
    if set_.any():
        out[set_] = pd.to_datetime(ms[set_], unit="ms", utc=True)
    return out.array


def _strings(values: Iterable[str]) -> Any:
    """Strings with "" (unset on the wire) as None."""
    return np.array([v if v else None for v in values], dtype=object)


# ---------------------------------------------------------------- results

# Where each per-row field sits in a ResultRow (dotted attribute paths),
# but the metrics (their tables say).
_ROW_FIELDS = {
    "sweep_id": "sweep_id", "cell_id": "cell_id", "head": "head", "head_index": "head_index",
    "rank": "rank", "seed": "seed", "state": "state", "failure": "failure",
    "worker_id": "worker_id", "attempt": "attempt", "lease_id": "lease_id",
    "finished_unix_ms": "finished_unix_ms", "cached_from_cell_id": "cached_from_cell_id",
    "device": "result.device", "recipe": "recipe",
    **{f: f"worker_version.{f}" for f in _VERSION_FIELDS},
    **{f: f"result.facts.{f}" for f in _FACT_FIELDS},
}
# ResultColumns lists with one entry per row.
_DIRECT_COLUMNS = ("cell_id", "head_index", "rank", "seed", "state", "attempt", "lease_id",
                   "finished_unix_ms", "cached_from_cell_id")


def _row_metric(result: pb.SeedResult, name: str) -> Optional[float]:
    """An optional metric of one SeedResult: its entry in `metrics`, else
    (from a sender older than the map) its own field; None when missing."""
    if name in result.metrics:
        return result.metrics[name]
    has_field = name in pb.SeedResult.DESCRIPTOR.fields_by_name
    return getattr(result, name) if has_field and result.HasField(name) else None


def _reply_columns(reply: pb.QueryResultsResponse, built_ins: Sequence[pb.MetricInfo],
                   metrics: Sequence[str]) -> Dict[str, List[Any]]:
    """One reply's rows as plain per-field lists (the keys of _ROW_FIELDS,
    the built-ins' names and `metrics`), from `columns` or, from a
    coordinator that predates them, `rows`."""
    if not reply.HasField("columns"):
        out = {k: [operator.attrgetter(path)(r) for r in reply.rows]
               for k, path in _ROW_FIELDS.items()}
        for b in built_ins:
            out[b.name] = [operator.attrgetter(_row_path(b))(r) for r in reply.rows]
        for m in metrics:
            out[m] = [_row_metric(r.result, m) for r in reply.rows]
        return out
    try:
        out = _columns(reply.columns, built_ins, metrics)
    except IndexError as e:  # an index past its table
        raise RanksweepError(grpc.StatusCode.INTERNAL,
                             f"QueryResults reply: an index is past its table: {e}") from None
    n = len(reply.columns.cell_id)
    for k, values in out.items():
        if len(values) != n:
            raise RanksweepError(grpc.StatusCode.INTERNAL,
                                 f"QueryResults reply: columns.{k}: {len(values)} values for "
                                 f"{n} rows")
    return out


def _columns(c: pb.ResultColumns, built_ins: Sequence[pb.MetricInfo],
             metrics: Sequence[str]) -> Dict[str, List[Any]]:
    n = len(c.cell_id)
    for name in ("head_index", "worker", "worker_version", "device", "facts", "failure_row"):
        if any(i < 0 for i in getattr(c, name)):  # Python would count from the end
            raise IndexError(f"columns.{name} holds a negative index")
    out = {k: list(getattr(c, k)) for k in _DIRECT_COLUMNS}
    fields = pb.ResultColumns.DESCRIPTOR.fields_by_name
    for b in built_ins:
        if b.name not in fields:  # a built-in newer than this package: its list is not here
            out[b.name] = [None] * n
            continue
        values = getattr(c, b.name)  # empty: every row holds the empty value
        out[b.name] = list(values) if len(values) else [b.empty] * n
    out["sweep_id"] = [c.sweep_id] * n
    out["head"] = [c.heads[i] for i in c.head_index]
    out["worker_id"] = [c.workers[i] for i in c.worker]
    out["device"] = [c.devices[i] for i in c.device]
    versions = [c.worker_versions[i] for i in c.worker_version]
    for f in _VERSION_FIELDS:
        out[f] = [getattr(v, f) for v in versions]
    facts = [c.facts_table[i] for i in c.facts]
    for f in _FACT_FIELDS:
        out[f] = [getattr(x, f) for x in facts]
    out["failure"] = [""] * n
    for row, text in zip(c.failure_row, c.failure):
        out["failure"][row] = text
    out["recipe"] = list(c.recipe) if len(c.recipe) else [0] * n  # empty: all 0
    for m in metrics:
        out[m] = [None] * n  # a metric no row has is left out
    for metric in c.metrics:
        if metric.name not in metrics:  # not in the table: not a column
            continue
        if len(metric.values) != n:
            raise IndexError(f"columns.metrics {metric.name}: {len(metric.values)} values for "
                             f"{n} rows")
        values = list(metric.values)
        for row in metric.missing_rows:
            values[row] = None
        out[metric.name] = values
    return out


def _typed(values: Sequence[Any], integer: bool, absent: Any) -> Any:
    """A metric column: "Int64" or float64, missing where `absent` or None."""
    if any(v is None for v in values):
        absent = np.array([v is None for v in values], dtype=bool) | absent
        values = [0 if v is None else v for v in values]
    if integer:
        return _ints(values, absent)
    return _floats(values, absent)


def results_frame(replies: Sequence[pb.QueryResultsResponse],
                  spec: Optional[pb.SweepSpec] = None) -> pd.DataFrame:
    """The per-seed rows of QueryResults replies (pages, in order) as one
    DataFrame with result_columns(replies), one row per cell (per result: a
    cell that was trained again after a quarantine has its DONE row and its
    INVALID one), then one column per recipe axis of `spec` (the sweep's
    ranksweep.v1.SweepSpec; None: no axis columns). `failure` holds a failed
    cell's reason, and for an INVALID row who invalidated it and when. The
    metrics (one column each, as the coordinator's tables list them) are
    <NA> (or NaN) in a row that is not done; a test-split metric where the
    row has no test split; an optional metric where a row lacks it
    (`first_exact_step` for a row that never reached train exact accuracy 1)."""
    built_ins = _built_in_table(replies)
    table = _metric_table(replies)
    metrics = [name for name, _ in table]
    parts = [_reply_columns(r, built_ins, metrics) for r in replies]
    keys = list(_ROW_FIELDS) + [b.name for b in built_ins] + metrics
    cols = {k: [v for part in parts for v in part[k]] for k in keys}
    state = np.asarray(cols["state"], dtype=np.int64)
    # Rows without metrics: failed cells. Invalidated rows keep theirs.
    not_done = (state != pb.CELL_STATE_DONE) & (state != pb.CELL_STATE_INVALID)
    # A row has a test split when its test split's sequence count is not 0.
    test_size = [b.name for b in built_ins if b.test_split and b.field == "sequences"]
    no_test = not_done.copy()
    if test_size:
        no_test |= np.asarray([v or 0 for v in cols[test_size[0]]], dtype=np.int64) == 0
    rank = np.asarray(cols["rank"], dtype=np.int64)
    data = {
        "sweep_id": np.array(cols["sweep_id"], dtype=object),
        "cell_id": np.asarray(cols["cell_id"], dtype=np.int64),
        "head": np.array(cols["head"], dtype=object),
        "head_index": np.asarray(cols["head_index"], dtype=np.int64),
        "rank": _ints(rank, rank == 0),
        "seed": np.asarray(cols["seed"], dtype=np.uint64),
        "state": np.array([cell_state_name(s) for s in state], dtype=object),
        "device": np.where(not_done, None, _strings(cols["device"])),  # type: ignore[call-overload]
        "failure": _strings(cols["failure"]),
        "worker_id": _strings(cols["worker_id"]),
        "build_id": _strings(cols["build_id"]),
        "torch_version": _strings(cols["torch_version"]),
        "cuda_version": _strings(cols["cuda_version"]),
        "attempt": np.asarray(cols["attempt"], dtype=np.int64),
        "lease_id": np.asarray(cols["lease_id"], dtype=np.int64),
        "finished": _times(cols["finished_unix_ms"]),
        "cached_from_cell_id": _ints(cols["cached_from_cell_id"],
                                     np.asarray(cols["cached_from_cell_id"]) == 0),
    }
    for b in built_ins:
        data[b.name] = _typed(cols[b.name], b.integer, no_test if b.test_split else not_done)
    data["distinct_queries"] = _ints(cols["distinct_queries"], not_done)
    for bound in ("rank_lower_bound", "rank_upper_bound"):
        values = np.asarray(cols[bound], dtype=np.int64)
        data[bound] = _ints(values, not_done | (values == 0))  # 0: no bound
    for m, integer in table:
        data[m] = _typed(cols[m], integer, not_done)
    axes = _add_axis_columns(data, cols["recipe"], spec)
    return pd.DataFrame({k: data[k] for k in result_columns(replies) + axes})


# ---------------------------------------------------------------- curves

CURVE_COLUMNS = ("sweep_id", "cell_id", "head", "rank", "seed", "step", "loss", "train_error",
                 "train_position_accuracy", "test_error", "test_position_accuracy")


def curves_frame(replies: Sequence[pb.QueryResultsResponse],
                 spec: Optional[pb.SweepSpec] = None) -> pd.DataFrame:
    """The learning curves in QueryResults replies asked for with `curves`
    (pages, in order) as one long DataFrame: one row per evaluation of each
    done seed that has a curve, CURVE_COLUMNS, then `recipe` and one column
    per recipe axis of `spec`, as `ranksweep results --curves --format csv`
    has them. `rank` is <NA> for a head without a rank; the test columns are
    NaN when the dataset has no test split."""
    data: Dict[str, List[Any]] = {k: [] for k in CURVE_COLUMNS}
    recipes: List[int] = []
    for reply in replies:
        for row in reply.rows:
            if row.state != pb.CELL_STATE_DONE:
                continue
            c = row.result.curve
            n = len(c.steps)
            data["sweep_id"] += [row.sweep_id] * n
            data["cell_id"] += [row.cell_id] * n
            data["head"] += [row.head] * n
            data["rank"] += [row.rank] * n
            data["seed"] += [row.seed] * n
            recipes += [row.recipe] * n
            data["step"] += list(c.steps)
            data["loss"] += list(c.loss)
            data["train_error"] += list(c.train_error)
            data["train_position_accuracy"] += list(c.train_position_accuracy)
            if c.has_test:
                data["test_error"] += list(c.test_error)
                data["test_position_accuracy"] += list(c.test_position_accuracy)
            else:
                data["test_error"] += [np.nan] * n
                data["test_position_accuracy"] += [np.nan] * n
    rank = np.asarray(data["rank"], dtype=np.int64)
    out: Dict[str, Any] = {
        "sweep_id": np.array(data["sweep_id"], dtype=object),
        "cell_id": np.asarray(data["cell_id"], dtype=np.int64),
        "head": np.array(data["head"], dtype=object),
        "rank": _ints(rank, rank == 0),
        "seed": np.asarray(data["seed"], dtype=np.uint64),
        "step": np.asarray(data["step"], dtype=np.int64),
    }
    for k in CURVE_COLUMNS[6:]:
        out[k] = np.asarray(data[k], dtype=np.float64)
    axes = _add_axis_columns(out, recipes, spec)
    return pd.DataFrame({k: out[k] for k in list(CURVE_COLUMNS) + ["recipe"] + axes})


# ---------------------------------------------------------------- groups

def has_test_split(reply: pb.QueryResultsResponse) -> bool:
    """Whether a grouped reply's dataset has a test split."""
    if any(h.has_test_split for h in reply.heads):
        return True
    return reply.HasField("facts") and reply.facts.test_sequences > 0


def group_columns(spec: Optional[pb.SweepSpec] = None,
                  metrics: Sequence[str] = ()) -> List[str]:
    """The columns of groups_frame(reply, spec): the axes' follow recipe;
    then per optional metric of `metrics` (the names the reply's groups
    carry), its n and aggregate fields."""
    cols = ["head", "head_index", "rank", "recipe"]
    cols += [a.name for a in spec.axes] if spec is not None else []
    cols += ["n", "expected", "exact_seeds", "test_exact_seeds", "missing_seeds", "verdict",
             "test_verdict"]
    cols += [f"{a}_{f}" for a in AGGREGATES for f in AGGREGATE_FIELDS]
    cols += [f"{m}_{f}" for m in metrics for f in ("n",) + AGGREGATE_FIELDS]
    return cols


def _group_metrics(groups: Sequence[pb.ResultGroup]) -> List[str]:
    """The optional metrics the coordinator aggregates, in its order (none
    from a coordinator that predates them)."""
    for g in groups:
        if len(g.metrics):
            return [m.name for m in g.metrics]
    return []


_VERDICTS: Dict[int, str] = {
    pb.CRITERION_VERDICT_MEETS: "yes", pb.CRITERION_VERDICT_NOT_MET: "no",
    pb.CRITERION_VERDICT_UNDECIDED: "undecided"}


def _verdict(value: int) -> Optional[str]:
    """"yes", "no", "undecided" as the CLI's CSV writes a group's verdict;
    None when the reply has none (a coordinator that predates criteria)."""
    return _VERDICTS.get(value)


def groups_frame(reply: pb.QueryResultsResponse,
                 spec: Optional[pb.SweepSpec] = None) -> pd.DataFrame:
    """A grouped QueryResults reply: one row per (head, rank, recipe),
    group_columns(spec).

    Aggregates are over the done seeds of the group; all NaN when none is
    done, std and ci95 NaN with fewer than two; test_* NaN (and
    test_exact_seeds <NA>) when the dataset has no test split.
    `missing_seeds` is a list of the seeds without a DONE result.
    `verdict` / `test_verdict` say whether the group meets the query's
    criterion ("yes", "no", "undecided"; test_verdict None without a test
    split). With `spec` (the sweep's SweepSpec), one column per axis. Then,
    per optional metric the coordinator aggregates, NAME_n (the done seeds
    that have it) and NAME_mean ... NAME_ci95 over them (NaN when n is 0).
    """
    groups = list(reply.groups)
    test = has_test_split(reply)
    n = np.asarray([g.n for g in groups], dtype=np.int64)
    rank = np.asarray([g.rank for g in groups], dtype=np.int64)
    data = {
        "head": np.array([g.head for g in groups], dtype=object),
        "head_index": np.asarray([g.head_index for g in groups], dtype=np.int64),
        "rank": _ints(rank, rank == 0),
        "n": n,
        "expected": np.asarray([g.expected for g in groups], dtype=np.int64),
        "exact_seeds": np.asarray([g.exact_seeds for g in groups], dtype=np.int64),
        "test_exact_seeds": _ints([g.test_exact_seeds for g in groups],
                                  np.full(len(groups), not test)),
        "missing_seeds": pd.Series([list(g.missing_seeds) for g in groups], dtype=object).array,
        "verdict": np.array([_verdict(g.verdict) for g in groups], dtype=object),
        "test_verdict": np.array([_verdict(g.test_verdict) if test else None for g in groups],
                                 dtype=object),
    }
    _add_axis_columns(data, [g.recipe for g in groups], spec)
    for a in AGGREGATES:
        absent = (n == 0) | (not test and a.startswith("test_"))
        for f in AGGREGATE_FIELDS:
            missing = absent | ((n < 2) if f in ("std", "ci95") else False)
            data[f"{a}_{f}"] = _floats([getattr(getattr(g, a), f) for g in groups], missing)
    metrics = _group_metrics(groups)
    for name in metrics:
        found = [next((m for m in g.metrics if m.name == name), None) for g in groups]
        m_n = np.asarray([0 if m is None else m.n for m in found], dtype=np.int64)
        data[f"{name}_n"] = m_n
        for f in AGGREGATE_FIELDS:
            missing = (m_n == 0) | ((m_n < 2) if f in ("std", "ci95") else False)
            data[f"{name}_{f}"] = _floats(
                [0.0 if m is None else getattr(m.aggregate, f) for m in found], missing)
    return pd.DataFrame(data, columns=group_columns(spec, metrics))


SUMMARY_COLUMNS = ("head", "head_index", "has_rank", "transition_rank", "reason",
                   "test_transition_rank", "test_reason", "caveat", "rank_lower_bound",
                   "rank_upper_bound", "no_bound", "criterion", "recipes_meeting",
                   "test_recipes_meeting")


def summary_frame(reply: pb.QueryResultsResponse) -> pd.DataFrame:
    """A grouped QueryResults reply's per-head summaries: one row per head,
    SUMMARY_COLUMNS. transition_rank is <NA> when undefined (`reason` says
    why) and for heads without a rank (`reason` says on how many seeds they
    are exact); the test_ columns are <NA>/None without a test split; the
    bounds are the dataset's theory bounds, <NA> when it has none or no cell
    is done yet, and for heads they do not apply to, whose `no_bound` says
    why ("multi-head", "signed", "softmax", "construction", "loss ce"; None
    when they apply). `criterion` is the one the coordinator used ("all",
    "mean:0.99", "seeds:3"; None from a coordinator that predates it).
    `recipes_meeting` lists the labels of the recipes that meet the
    criterion at the transition rank ("lr=0.003"; "" for a sweep without
    axes), empty when the transition is undefined; test_recipes_meeting the
    same on the test split, None without one."""
    heads = list(reply.heads)
    k = len(heads)
    facts = reply.facts if reply.HasField("facts") else None
    lower = facts.rank_lower_bound if facts is not None else 0
    upper = facts.rank_upper_bound if facts is not None else 0
    data = {
        "head": np.array([h.head for h in heads], dtype=object),
        "head_index": np.asarray([h.head_index for h in heads], dtype=np.int64),
        "has_rank": np.asarray([h.has_rank for h in heads], dtype=bool),
        "transition_rank": _ints([h.transition_rank for h in heads],
                                 [not h.transition_defined for h in heads]),
        "reason": np.array([h.reason for h in heads], dtype=object),
        "test_transition_rank": _ints(
            [h.test_transition_rank for h in heads],
            [not (h.has_test_split and h.test_transition_defined) for h in heads]),
        "test_reason": np.array([h.test_reason if h.has_test_split else None for h in heads],
                                dtype=object),
        "caveat": _strings([h.caveat for h in heads]),
        "rank_lower_bound": _ints([lower] * k, [lower == 0 or h.no_bound for h in heads]),
        "rank_upper_bound": _ints([upper] * k, [upper == 0 or h.no_bound for h in heads]),
        "no_bound": _strings([h.no_bound for h in heads]),
        "criterion": np.array([reply.criterion or None] * k, dtype=object),
        "recipes_meeting": pd.Series(
            [_meeting(reply, h, False) for h in heads], dtype=object).array,
        "test_recipes_meeting": pd.Series(
            [_meeting(reply, h, True) if h.has_test_split else None for h in heads],
            dtype=object).array,
    }
    return pd.DataFrame(data, columns=list(SUMMARY_COLUMNS))


def _meeting(reply: pb.QueryResultsResponse, head: Any, test: bool) -> List[str]:
    """Labels of the recipes meeting the criterion at the head's transition
    rank (the reply's recipe_labels), [] when it is undefined."""
    defined = head.test_transition_defined if test else head.transition_defined
    rank = head.test_transition_rank if test else head.transition_rank
    if not defined:
        return []
    for o in head.ranks:
        if o.rank == rank:
            recipes = o.test_recipes_meeting if test else o.recipes_meeting
            return [reply.recipe_labels.get(r, f"recipe {r}") for r in recipes]
    return []


# ---------------------------------------------------------------- sweeps, workers

SWEEP_COLUMNS = ("sweep_id", "name", "owner", "state", "total", "pending", "leased", "done",
                 "failed", "cancelled", "pruned", "grid_cells", "cached_cells", "priority",
                 "created", "finished", "mean_cell_seconds")


def sweeps_frame(sweeps: Iterable[pb.SweepInfo]) -> pd.DataFrame:
    """SweepInfo messages, one row each, SWEEP_COLUMNS. `leased` cells are
    running on a worker; `finished` is NaT while the sweep runs and
    mean_cell_seconds NaN before a cell finishes."""
    sweeps = list(sweeps)
    mean = [s.mean_cell_seconds for s in sweeps]
    data = {
        "sweep_id": np.array([s.sweep_id for s in sweeps], dtype=object),
        "name": np.array([s.name for s in sweeps], dtype=object),
        "owner": _strings([s.owner for s in sweeps]),
        "state": np.array([sweep_state_name(s.state) for s in sweeps], dtype=object),
        "grid_cells": np.asarray([s.grid_cells for s in sweeps], dtype=np.int64),
        "cached_cells": np.asarray([s.cached_cells for s in sweeps], dtype=np.int64),
        "priority": np.asarray([s.priority for s in sweeps], dtype=np.int64),
        "created": _times([s.created_unix_ms for s in sweeps]),
        "finished": _times([s.finished_unix_ms for s in sweeps]),
        "mean_cell_seconds": _floats(mean, np.asarray(mean) == 0),
    }
    for c in ("total", "pending", "leased", "done", "failed", "cancelled", "pruned"):
        data[c] = np.asarray([getattr(s.counts, c) for s in sweeps], dtype=np.int64)
    return pd.DataFrame(data, columns=list(SWEEP_COLUMNS))


WORKER_COLUMNS = ("worker_id", "hostname", "device", "device_name", "slots", "memory_bytes",
                  "build_id", "torch_version", "cuda_version", "leased_cells",
                  "completed_cells", "alive", "registered", "last_seen")


def workers_frame(workers: Iterable[pb.WorkerInfo]) -> pd.DataFrame:
    """WorkerInfo messages, one row each, WORKER_COLUMNS. memory_bytes is
    <NA> when the worker did not say; cuda_version None for a CPU LibTorch."""
    workers = list(workers)
    memory = np.asarray([w.memory_bytes for w in workers], dtype=np.int64)
    data = {
        "worker_id": np.array([w.worker_id for w in workers], dtype=object),
        "hostname": _strings([w.hostname for w in workers]),
        "device": _strings([w.device for w in workers]),
        "device_name": _strings([w.device_name for w in workers]),
        "slots": np.asarray([w.slots for w in workers], dtype=np.int64),
        "memory_bytes": _ints(memory, memory == 0),
        "build_id": _strings([w.version.build_id for w in workers]),
        "torch_version": _strings([w.version.torch_version for w in workers]),
        "cuda_version": _strings([w.version.cuda_version for w in workers]),
        "leased_cells": np.asarray([w.leased_cells for w in workers], dtype=np.int64),
        "completed_cells": np.asarray([w.completed_cells for w in workers], dtype=np.int64),
        "alive": np.asarray([w.alive for w in workers], dtype=bool),
        "registered": _times([w.registered_unix_ms for w in workers]),
        "last_seen": _times([w.last_seen_unix_ms for w in workers]),
    }
    return pd.DataFrame(data, columns=list(WORKER_COLUMNS))


# ---------------------------------------------------------------- watch

@dataclasses.dataclass(frozen=True)
class Progress:
    """One WatchSweep event: the sweep's counts when it was sent and what
    changed (`message`, e.g. "cell kernel/elu1 r=8 seed=2 done"; may be "").
    `running` is the cells leased to workers. `ended` is true on the last
    event, once the sweep is DONE, FAILED or CANCELLED."""
    sweep_id: str
    name: str
    state: str
    total: int
    pending: int
    running: int
    done: int
    failed: int
    cancelled: int
    pruned: int  # stopped by recipe pruning (--prune)
    mean_cell_seconds: float
    message: str
    recent_failures: tuple

    @property
    def ended(self) -> bool:
        return self.state not in ("RUNNING", "UNSPECIFIED")


def progress_from_event(event: pb.SweepEvent) -> Progress:
    """A Progress from a ranksweep.v1.SweepEvent."""
    s = event.sweep
    return Progress(
        sweep_id=s.sweep_id, name=s.name, state=sweep_state_name(s.state),
        total=s.counts.total, pending=s.counts.pending, running=s.counts.leased,
        done=s.counts.done, failed=s.counts.failed, cancelled=s.counts.cancelled,
        pruned=s.counts.pruned,
        mean_cell_seconds=s.mean_cell_seconds if s.mean_cell_seconds else float("nan"),
        message=event.message, recent_failures=tuple(s.recent_failures))
