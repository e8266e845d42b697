"""ranksweep: the Python client of the ranksweep coordinator.

Submit sweeps from dicts or spec files, follow them, and read their results
as pandas DataFrames; python/README.md has the tour. The package runs from
the build tree, where the build puts it next to its generated gRPC modules:

    ./scripts/build
    PYTHONPATH=build/python python3 -c 'import ranksweep'
"""

import importlib

try:
    importlib.import_module("ranksweep.v1.ranksweep_pb2")  # generated at build time
except ImportError as e:  # pragma: no cover - a source checkout without a build
    raise ImportError(
        "ranksweep: the generated modules ranksweep.v1.ranksweep_pb2 and _pb2_grpc are "
        "missing; they are made from proto/ by the build. Run ./scripts/build and put "
        "build/python (not python/) on PYTHONPATH.") from e

from ranksweep.client import Client, DEFAULT_ADDR
from ranksweep.errors import RanksweepError, SpecError
from ranksweep.frames import Progress
from ranksweep.spec import load_spec, spec_to_proto

__all__ = ["Client", "DEFAULT_ADDR", "Progress", "RanksweepError", "SpecError", "load_spec",
           "spec_to_proto"]
