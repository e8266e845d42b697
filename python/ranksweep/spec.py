"""Sweep specs: from a dict, a YAML file or a JSON file to a ranksweep.v1.SweepSpec.

A spec uses the field names of the CLI's spec files (common/spec/spec.h):

    {"name": "demo", "dataset": {"kind": "exhaustive", "m": 2, "seq_len": 3},
     "heads": [{"kind": "kernel", "feature_map": "elu1"}, {"kind": "softmax"}],
     "ranks": [1, 4], "seed_count": 3, "train": {"max_steps": 300, "lr": 0.02}}

The rules are the CLI's, so a file means the same to both: unknown keys are
errors (a typo never passes silently), integers must be integers in range,
enums are named as in the spec files ("kernel", "elu1", "ce"), a missing or
null key keeps the default, and YAML follows the YAML 1.2 core schema the CLI
uses (`lr: 3e-3` is a number, `yes` is a string, duplicate keys are errors).
Errors are SpecError naming the field, with "FILE:LINE:COLUMN: " in front for
a YAML file. Ranges (m in 1..64, ...) are checked by the coordinator with the
CLI's own validator, which answers INVALID_ARGUMENT naming the field and the
range in the words the CLI prints ("dataset.m must be in 1..64, got 0").

Recipe axes: a list where one of the fields lr, weight_decay, max_steps,
batch_size, schedule (names), warmup_steps (train) or m, weight,
num_queries, pool_size, train_size, test_size, split (names), hard_share,
test_pool_share (dataset) stood makes that field an axis, as in the
CLI's spec files: `train: {lr: [0.01, 0.003]}` sweeps both, crossed with
every other axis and with head x rank x seed. The list's first value is also
the field's value; an empty list is an error naming the field.

A value given is sent as given, 0 included: the fields whose default is not
0 (dataset.m, dataset.max_overlap, train.max_steps, ...) have presence on the
wire (proto3 `optional`), so `max_steps: 0` reaches the worker as 0 steps and
`m: 0` is refused by the coordinator, never replaced by the default. A
missing or null key leaves the field absent: the coordinator's default.

No network here; the functions have no state and are safe from any thread.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import yaml

from ranksweep.errors import SpecError
from ranksweep.v1 import ranksweep_pb2 as pb

# Enum names in the order of spec.h; the wire value is the index + 1 (0 is
# "unspecified", which the coordinator reads as the default).
DATASET_KINDS = ("exhaustive", "witness", "pool")
HEAD_KINDS = ("kernel", "softmax", "signed_kernel", "multihead_kernel")
FEATURE_MAPS = ("elu1", "relu_eps", "softplus", "exp", "favor")
CONSTRUCTIONS = ("none", "rank1", "indicator", "softmax_exact")
LOSS_KINDS = ("mse", "ce")
LR_SCHEDULES = ("constant", "cosine")
SWEEP_MODES = ("grid", "search")
POOL_SPLITS = ("tokens", "sequences")

# The fields that may be axes, in the coordinator's canonical order
# (AxisNames() in common/spec/spec.h): axis name -> (object, key).
AXES = (
    ("lr", "train"), ("weight_decay", "train"), ("max_steps", "train"),
    ("batch_size", "train"), ("m", "dataset"), ("weight", "dataset"),
    ("num_queries", "dataset"), ("pool_size", "dataset"), ("train_size", "dataset"),
    ("test_size", "dataset"), ("schedule", "train"), ("warmup_steps", "train"),
    ("split", "dataset"), ("hard_share", "dataset"), ("test_pool_share", "dataset"),
)
# Named axes: their values are written as names and sent as their index.
NAMED_AXES = {"schedule": LR_SCHEDULES, "split": POOL_SPLITS}
# Axes whose values are integers; the others are reals.
INTEGER_AXES = frozenset(name for name, _ in AXES) - {
    "lr", "weight_decay", "hard_share", "test_pool_share"}

_INT32 = (-(2**31), 2**31 - 1)
_UINT64 = (0, 2**64 - 1)

# Per message: key -> type: "int" (int32), "uint64", "number", "bool",
# "string", ints (a list of int32), uint64s (a list of uint64), or a tuple of
# enum names.
_DATASET_FIELDS = {
    "kind": DATASET_KINDS,
    "m": "int",
    "seq_len": "int",
    "final_query_only": "bool",
    "data_seed": "uint64",
    "code_weight": "int",
    "max_overlap": "int",
    "num_queries": "int",
    "weight": "int",
    "bernoulli_p": "number",
    "pool_size": "int",
    "test_pool_share": "number",
    "train_size": "int",
    "test_size": "int",
    "hard_share": "number",
    "split": POOL_SPLITS,
}
_HEAD_FIELDS = {
    "kind": HEAD_KINDS,
    "feature_map": FEATURE_MAPS,
    "hidden": "ints",
    "num_heads": "int",
    "value_dim": "int",
    "score_dim": "int",
    "relu_eps": "number",
    "construction": CONSTRUCTIONS,
    "beta": "number",
}
_TRAIN_FIELDS = {
    "lr": "number",
    "beta1": "number",
    "beta2": "number",
    "weight_decay": "number",
    "batch_size": "int",
    "max_steps": "int",
    "eval_every": "int",
    "early_stop_evals": "int",  # 0 = never: sent as -1, see below
    "loss": LOSS_KINDS,
    "schedule": LR_SCHEDULES,
    "warmup_steps": "int",
}
_SWEEP_SCALARS = {
    "name": "string",
    "ranks": "ints",
    "seeds": "uint64s",
    "seed_count": "int",
    "priority": "int",
    "mode": SWEEP_MODES,
}
# What submit() takes as a spec: a dict of the spec files' fields, the path
# of such a file, or the proto itself.
SpecInput = Union[Mapping[str, Any], str, "os.PathLike[str]", pb.SweepSpec]

_SWEEP_KEYS = ("name", "dataset", "heads", "ranks", "seeds", "seed_count", "train",
               "priority", "mode", "reuse_results", "prune")
# Recipe pruning (docs/ANALYSIS.md, "Recipe pruning"): "none", "halving" or
# an object of these.
PRUNE_RULES = ("none", "halving")
_PRUNE_KEYS = ("rule", "eta", "min_steps", "margin")


def _fill_prune(out: pb.SweepSpec, prune: Any) -> None:
    """`prune` as the CLI reads it: a rule's name or {rule, eta, min_steps,
    margin}; ranges are the coordinator's to check, as for every field."""
    if isinstance(prune, str):
        if prune not in PRUNE_RULES:
            raise SpecError(f"prune must be one of none, halving; got {_dump(prune)}")
        prune = {"rule": prune}
    if not isinstance(prune, Mapping):
        raise SpecError('prune must be "none", "halving" or an object {rule, eta, min_steps, '
                        f"margin}}, got {_dump(prune)}")
    _check_unknown("prune", prune, _PRUNE_KEYS)
    rule = prune.get("rule", "none")
    if rule not in PRUNE_RULES:
        raise SpecError(f'prune.rule must be one of none, halving; got {_dump(rule)}')
    out.prune.rule = pb.PruneRule.Value("PRUNE_RULE_" + rule.upper())
    for key in ("eta", "min_steps"):
        if key in prune:
            value = prune[key]
            if isinstance(value, bool) or not isinstance(value, int):
                raise SpecError(f"prune.{key} must be an integer, got {_dump(value)}")
            setattr(out.prune, key, value)
    if "margin" in prune:
        value = prune["margin"]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SpecError(f"prune.margin must be a number, got {_dump(value)}")
        out.prune.margin = float(value)


def _dump(value: Any) -> str:
    """The value as the CLI's JSON parser prints it in an error."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _read_int(field: str, v: Any, bounds: Tuple[int, int]) -> int:
    if not _is_int(v):
        raise SpecError(f"{field} must be an integer, got {_dump(v)}")
    lo, hi = bounds
    if lo == 0 and v < 0:
        raise SpecError(f"{field} must be a nonnegative integer, got {_dump(v)}")
    if v < lo or v > hi:
        raise SpecError(f"{field} must be an integer in range, got {_dump(v)}")
    return v


def _read_number(field: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SpecError(f"{field} must be a number, got {_dump(v)}")
    try:
        x = float(v)
    except OverflowError:  # an int past any double
        x = math.inf
    if not math.isfinite(x):
        raise SpecError(f"{field} must be a number, got {_dump(v)}")
    return x


def _read_list(field: str, v: Any, bounds: Tuple[int, int]) -> List[int]:
    if not isinstance(v, (list, tuple)):
        raise SpecError(f"{field} must be an array of integers, got {_dump(v)}")
    return [_read_int(f"{field}[{i}]", x, bounds) for i, x in enumerate(v)]


def _check_object(path: str, obj: Any) -> None:
    if not isinstance(obj, dict):
        where = path or "the document"
        raise SpecError(f"{where} must be a JSON object, got {_type_name(obj)}")


def _field(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check_unknown(path: str, obj: Mapping[str, Any], known: Any) -> None:
    for key in obj:
        if key not in known:
            raise SpecError(f'unknown field "{_field(path, key)}"')


def _fill(msg: Any, path: str, obj: Any, fields: Mapping[str, Any]) -> None:
    """Sets the fields of proto `msg` from `obj` by the table `fields`."""
    _check_object(path, obj)
    for key, kind in fields.items():
        v = obj.get(key)
        if v is None:
            continue
        field = _field(path, key)
        if isinstance(kind, tuple):
            if not isinstance(v, str):
                raise SpecError(f"{field} must be a string, got {_dump(v)}")
            if v not in kind:
                raise SpecError(f'{field} must be one of {", ".join(kind)}; got "{v}"')
            setattr(msg, key, kind.index(v) + 1)
            continue
        if kind == "int":
            v = _read_int(field, v, _INT32)
        elif kind == "uint64":
            v = _read_int(field, v, _UINT64)
        elif kind == "number":
            v = _read_number(field, v)
        elif kind == "bool":
            if not isinstance(v, bool):
                raise SpecError(f"{field} must be true or false, got {_dump(v)}")
        elif kind == "string":
            if not isinstance(v, str):
                raise SpecError(f"{field} must be a string, got {_dump(v)}")
        elif kind == "ints":
            getattr(msg, key).extend(_read_list(field, v, _INT32))
            continue
        elif kind == "uint64s":
            getattr(msg, key).extend(_read_list(field, v, _UINT64))
            continue
        # Setting an `optional` field gives it presence, 0 included.
        setattr(msg, key, v)
    _check_unknown(path, obj, fields)


def _take_axes(spec: Mapping[str, Any], out: pb.SweepSpec) -> Dict[str, Any]:
    """A copy of `spec` with each axis list replaced by its first value; the
    lists go to out.axes in canonical order (the CLI's TakeAxes)."""
    spec = dict(spec)
    for name, obj in AXES:
        section = spec.get(obj)
        if not isinstance(section, dict) or not isinstance(section.get(name), (list, tuple)):
            continue
        field = f"{obj}.{name}"
        values = section[name]
        if not values:
            raise SpecError(f"{field} must be a number or a non-empty list of numbers, got []")
        axis = out.axes.add(name=name)
        for i, v in enumerate(values):
            if name in NAMED_AXES:
                names = NAMED_AXES[name]
                if v not in names:
                    raise SpecError(f"{field}[{i}] must be one of {', '.join(names)}; "
                                    f"got {_dump(v)}")
                axis.values.append(float(names.index(v)))
                continue
            if _is_int(v):
                v = float(_read_int(f"{field}[{i}]", v, (-(2**63), 2**63 - 1)))
            axis.values.append(_read_number(f"{field}[{i}]", v))
        spec[obj] = {**section, name: values[0]}
    return spec


def spec_to_proto(spec: Mapping[str, Any]) -> pb.SweepSpec:
    """A ranksweep.v1.SweepSpec from a spec dict. Raises SpecError."""
    _check_object("", spec)
    out = pb.SweepSpec()
    spec = _take_axes(spec, out)
    scalars = {k: spec[k] for k in _SWEEP_SCALARS if k in spec}
    _fill(out, "", scalars, _SWEEP_SCALARS)
    if spec.get("dataset") is not None:
        _fill(out.dataset, "dataset", spec["dataset"], _DATASET_FIELDS)
    heads = spec.get("heads")
    if heads is not None:
        if not isinstance(heads, (list, tuple)):
            raise SpecError("heads must be an array of head objects")
        for i, head in enumerate(heads):
            _fill(out.heads.add(), f"heads[{i}]", head, _HEAD_FIELDS)
    train = spec.get("train")
    if train is not None:
        _fill(out.train, "train", train, _TRAIN_FIELDS)
        stop = train.get("early_stop_evals")
        if stop is not None:
            # Spec: 0 = never stop early. Wire: 0 = the default (3), -1 = never.
            if stop < 0:
                raise SpecError(f"train.early_stop_evals must be in 0..1000, got {stop}")
            out.train.early_stop_evals = -1 if stop == 0 else stop
    reuse = spec.get("reuse_results")
    if reuse is not None:
        if not isinstance(reuse, bool):
            raise SpecError(f"reuse_results must be true or false, got {_dump(reuse)}")
        out.no_result_cache = not reuse
    if spec.get("prune") is not None:
        _fill_prune(out, spec["prune"])
    _check_unknown("", spec, _SWEEP_KEYS)
    return out


# ---------------------------------------------------------------- files

_INT_RE = re.compile(r"[-+]?[0-9]+")
_HEX_RE = re.compile(r"0x[0-9a-fA-F]+")
_FLOAT_RE = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_INF_RE = re.compile(r"[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")


def _where(source: str, mark: Any) -> str:
    return f"{source}:{mark.line + 1}:{mark.column + 1}"


def _plain_scalar(value: str, source: str, mark: Any) -> Any:
    """YAML 1.2 core schema resolution of a plain scalar, as the CLI does it."""
    if value in ("", "~", "null", "Null", "NULL"):
        return None
    if value in ("true", "True", "TRUE"):
        return True
    if value in ("false", "False", "FALSE"):
        return False
    if _INT_RE.fullmatch(value):
        x = int(value)
        if x > _UINT64[1] or x < -(2**63):
            raise SpecError(f"{_where(source, mark)}: integer out of range: {value}")
        return x
    if _HEX_RE.fullmatch(value):
        x = int(value, 16)
        if x > _UINT64[1]:
            raise SpecError(f"{_where(source, mark)}: integer out of range: {value}")
        return x
    if _FLOAT_RE.fullmatch(value):
        real = float(value)
        if not math.isfinite(real):
            raise SpecError(f"{_where(source, mark)}: number out of range: {value}")
        return real
    if _INF_RE.fullmatch(value):
        raise SpecError(f"{_where(source, mark)}: non-finite number not allowed: {value}")
    return value


def _node_value(node: Any, path: str, source: str, marks: Dict[str, Any]) -> Any:
    if isinstance(node, yaml.ScalarNode):
        if node.style is None:
            return _plain_scalar(node.value, source, node.start_mark)
        return node.value  # quoted or block scalars stay strings
    if isinstance(node, yaml.SequenceNode):
        items: List[Any] = []
        for i, item in enumerate(node.value):
            item_path = f"{path}[{i}]"
            marks[item_path] = item.start_mark
            items.append(_node_value(item, item_path, source, marks))
        return items
    out: Dict[str, Any] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise SpecError(
                f"{_where(source, key_node.start_mark)}: mapping keys must be plain strings")
        key = key_node.value
        if key in out:
            raise SpecError(f'{_where(source, key_node.start_mark)}: duplicate key "{key}"')
        key_path = f"{path}.{key}" if path else key
        marks[key_path] = key_node.start_mark
        out[key] = _node_value(value_node, key_path, source, marks)
    return out


def _yaml_to_dict(text: str, source: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The spec dict of YAML text, and where each key sits (dotted path -> mark)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        what = e.problem or e.context or str(e)
        raise SpecError(f"{_where(source, mark)}: {what}") from None
    except yaml.YAMLError as e:
        raise SpecError(f"{source}: {e}") from None
    marks: Dict[str, Any] = {}
    value = None if root is None else _node_value(root, "", source, marks)
    if not isinstance(value, dict):
        raise SpecError(f"{source}:1:1: a sweep spec must be a mapping of fields")
    return value, marks


def _locate(message: str, marks: Mapping[str, Any], source: str) -> str:
    """The message with the place of the longest key path it mentions."""
    best = None
    for path in marks:
        if path in message and (best is None or len(path) > len(best)):
            best = path
    if best is None:
        return f"{source}: {message}"
    return f"{_where(source, marks[best])}: {message}"


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        good = data[:e.start].decode("utf-8")
        line = good.count("\n") + 1
        column = len(good) - (good.rfind("\n") + 1) + 1
        raise SpecError(f"{source}:{line}:{column}: the file is not valid UTF-8") from None


def parse_spec_text(text: str, fmt: str,
                    source: str = "<spec>") -> Tuple[Any, pb.SweepSpec]:
    """(spec dict, SweepSpec proto) from spec text; fmt is "yaml" or "json"."""
    if fmt == "json":
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as e:
            raise SpecError(f"{source}: JSON syntax error at line {e.lineno}, column "
                            f"{e.colno}: {e.msg}") from None
        try:
            return spec, spec_to_proto(spec)
        except SpecError as e:
            raise SpecError(f"{source}: {e.message}") from None
    spec, marks = _yaml_to_dict(text, source)
    try:
        return spec, spec_to_proto(spec)
    except SpecError as e:
        raise SpecError(_locate(e.message, marks, source)) from None


def guess_format(path: Union[str, "os.PathLike[str]"], text: str) -> str:
    """"json" for *.json, "yaml" for *.yaml / *.yml, else by the first character."""
    lower = str(path).lower()
    if lower.endswith(".json"):
        return "json"
    if lower.endswith((".yaml", ".yml")):
        return "yaml"
    return "json" if text.lstrip().startswith("{") else "yaml"


def load_spec(path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """The spec dict of a YAML or JSON spec file. Raises SpecError or OSError."""
    return _load(path)[0]


def _load(path: Union[str, "os.PathLike[str]"]) -> Tuple[Any, pb.SweepSpec]:
    with open(path, "rb") as f:
        data = f.read()
    source = os.fspath(path)
    text = _decode(data, source)
    return parse_spec_text(text, guess_format(source, text), source)


def to_proto(spec: SpecInput) -> pb.SweepSpec:
    """A SweepSpec proto from a dict, a path (str or os.PathLike) or a SweepSpec."""
    if isinstance(spec, pb.SweepSpec):
        return spec
    if isinstance(spec, dict):
        return spec_to_proto(spec)
    if isinstance(spec, (str, os.PathLike)):
        return _load(spec)[1]
    raise TypeError(f"a spec is a dict, a spec file path or a SweepSpec, not "
                    f"{type(spec).__name__}")


# ---------------------------------------------------------------- back to a dict

# The dataset fields each kind reads, beside kind, m, seq_len,
# final_query_only and data_seed; the others are left out of a dict, as the
# CLI's SweepSpecToJson leaves them out (common/spec/spec_json.cc).
_WITNESS_ONLY = ("code_weight", "max_overlap", "num_queries")
_POOL_ONLY = ("weight", "bernoulli_p", "pool_size", "test_pool_share", "train_size",
              "test_size", "hard_share", "split")


def _has(msg: Any, key: str) -> Optional[bool]:
    """Whether an `optional` field is set; None for a field without presence."""
    try:
        return bool(msg.HasField(key))
    except ValueError:
        return None


def _to_dict(msg: Any, fields: Mapping[str, Any]) -> Dict[str, Any]:
    """The keys of `fields` that `msg` sets: enums by name (unspecified left
    out), `optional` fields when present, the rest always."""
    out: Dict[str, Any] = {}
    for key, kind in fields.items():
        value = getattr(msg, key)
        if isinstance(kind, tuple):
            if value:
                out[key] = kind[value - 1]
        elif kind in ("ints", "uint64s"):
            out[key] = [int(v) for v in value]
        elif _has(msg, key) is not False:
            out[key] = value
    return out


def spec_to_dict(spec: pb.SweepSpec) -> Dict[str, Any]:
    """The spec dict of a ranksweep.v1.SweepSpec: the shape submit() and the
    spec files take, so `submit(spec_to_dict(p))` submits the same sweep.

    A spec the coordinator stored (Client.spec) has every field resolved,
    and its dict is the one `ranksweep submit --dry-run` prints for it: the
    dataset fields of its kind only, `train.schedule`, `warmup_steps` and
    `dataset.split` only when not the default, `early_stop_evals` as the spec counts it (0 =
    never), `reuse_results`, and each recipe axis as the list of its values
    where the field's value stood (integers for integer axes, schedule
    names). Fields a partial spec leaves unset are left out: the default."""
    out: Dict[str, Any] = {"name": spec.name}
    dataset = _to_dict(spec.dataset, _DATASET_FIELDS)
    kind = dataset.get("kind")
    for key in (_WITNESS_ONLY if kind != "witness" else ()) + \
            (_POOL_ONLY if kind != "pool" else ()):
        dataset.pop(key, None)
    out["dataset"] = dataset
    out["heads"] = [_to_dict(h, _HEAD_FIELDS) for h in spec.heads]
    out["ranks"] = [int(r) for r in spec.ranks]
    out["seeds"] = [int(s) for s in spec.seeds]
    out["seed_count"] = spec.seed_count
    train = _to_dict(spec.train, _TRAIN_FIELDS)
    stop = spec.train.early_stop_evals  # wire: 0 = the default, -1 = never
    if stop == 0:
        train.pop("early_stop_evals")
    else:
        train["early_stop_evals"] = 0 if stop < 0 else stop
    if train.get("schedule") == "constant":
        del train["schedule"]
    if train.get("warmup_steps") == 0:
        del train["warmup_steps"]
    if dataset.get("split") == "tokens":  # the default, left out as the CLI does
        del dataset["split"]
    out["train"] = train
    out["priority"] = spec.priority
    if spec.mode:
        out["mode"] = SWEEP_MODES[spec.mode - 1]
    out["reuse_results"] = not spec.no_result_cache
    if spec.HasField("prune") and spec.prune.rule == 2:
        out["prune"] = {"rule": "halving",
                        "eta": spec.prune.eta if spec.prune.HasField("eta") else 3,
                        "min_steps": spec.prune.min_steps,
                        "margin": spec.prune.margin if spec.prune.HasField("margin") else 0.05}
    objects = {"dataset": dataset, "train": train}
    places = dict(AXES)
    for axis in spec.axes:
        values: List[Any] = list(axis.values)
        if axis.name in NAMED_AXES:
            values = [NAMED_AXES[axis.name][int(v)] for v in values]
        elif axis.name in INTEGER_AXES:
            values = [int(v) for v in values]
        objects[places[axis.name]][axis.name] = values
    return out
