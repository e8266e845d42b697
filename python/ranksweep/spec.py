"""Sweep specs: what the user gives submit() or validate(), as the request's input.

A spec is a ranksweep.v1.SweepSpec, a dict with the field names of the CLI's
spec files (common/spec/spec.h), or the path of such a file (YAML or JSON).
This module only packs it: the coordinator parses and validates it with the
parser of `ranksweep submit -f` (common/spec/spec_file.h), so a file or a
dict means the same to the CLI and to Python, and its errors (unknown
fields, types, ranges, YAML syntax) come back from the coordinator as
INVALID_ARGUMENT naming the field, or the file's line and column.

No network here; the functions have no state and are safe from any thread.
"""

from __future__ import annotations

import json
import numbers
import os
from typing import Any, Mapping, Union

from ranksweep.errors import SpecError
from ranksweep.v1 import ranksweep_pb2 as pb

# What submit() and validate() take as a spec: a dict of the spec files'
# fields, the path of such a file, or the proto itself.
SpecInput = Union[Mapping[str, Any], str, "os.PathLike[str]", pb.SweepSpec]
# The requests whose `input` oneof carries a spec.
SpecRequest = Union[pb.SubmitSweepRequest, pb.ValidateSweepRequest]

# The longest SpecText.source the coordinator takes (kMaxSpecSourceBytes).
_MAX_SOURCE_BYTES = 256


def _plain(value: Any) -> Any:
    """json.dumps' fallback: a Mapping as a dict, a number type of another
    library (numpy's int64, float32) as int or float; anything else is not
    JSON (TypeError)."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _source(path: str) -> str:
    """`path` as the name of the text in errors: as given, or its last 253
    bytes after "..." when it is longer than the coordinator takes."""
    if len(path.encode("utf-8")) <= _MAX_SOURCE_BYTES:
        return path
    tail = path[-(_MAX_SOURCE_BYTES - 3):]
    while len(tail.encode("utf-8")) > _MAX_SOURCE_BYTES - 3:
        tail = tail[1:]
    return "..." + tail


def _read(path: Union[str, "os.PathLike[str]"]) -> pb.SpecText:
    """The SpecText of a spec file. Raises OSError (FileNotFoundError for a
    missing file) and SpecError for a file that is not UTF-8, which the
    wire's string cannot carry ("FILE:LINE:COLUMN: the file is not valid
    UTF-8", as the CLI says it)."""
    source = _source(os.fspath(path))
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        good = data[:e.start].decode("utf-8")
        line = good.count("\n") + 1
        column = len(good) - (good.rfind("\n") + 1) + 1
        raise SpecError(f"{source}:{line}:{column}: the file is not valid UTF-8") from None
    lower = source.lower()
    fmt = ("json" if lower.endswith(".json")
           else "yaml" if lower.endswith((".yaml", ".yml")) else "")  # "": the coordinator guesses
    return pb.SpecText(text=text, format=fmt, source=source)


def spec_input(spec: SpecInput) -> Union[pb.SweepSpec, pb.SpecText]:
    """The request input of `spec`: a SweepSpec as it is; a dict (any
    Mapping) as SpecText of its JSON, source "<dict>"; a path (str or
    os.PathLike) as SpecText of the file's text, format "json" for *.json,
    "yaml" for *.yaml / *.yml, else "" (the coordinator guesses: '{' first
    is JSON), source the path as given.

    Raises SpecError for a dict that is not JSON (a set, an object, NaN),
    OSError (FileNotFoundError, ...) for a file that cannot be read,
    SpecError for a file that is not UTF-8, and TypeError for anything else."""
    if isinstance(spec, pb.SweepSpec):
        return spec
    if isinstance(spec, Mapping):
        try:
            text = json.dumps(spec, default=_plain, allow_nan=False)
        except (TypeError, ValueError) as e:  # ValueError: NaN, infinities, a cycle
            raise SpecError(f"<dict>: not JSON: {e}") from None
        return pb.SpecText(text=text, format="json", source="<dict>")
    if isinstance(spec, (str, os.PathLike)):
        return _read(spec)
    raise TypeError(f"a spec is a dict, a spec file path or a ranksweep.v1.SweepSpec, not "
                    f"{type(spec).__name__}")


def fill_request(request: SpecRequest, spec: SpecInput) -> None:
    """Sets request.spec or request.spec_text (the `input` oneof) to
    spec_input(spec). Raises what spec_input raises."""
    value = spec_input(spec)
    if isinstance(value, pb.SweepSpec):
        request.spec.CopyFrom(value)
    else:
        request.spec_text.CopyFrom(value)
