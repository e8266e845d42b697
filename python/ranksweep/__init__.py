"""ranksweep: the Python client of the ranksweep coordinator.

Submit sweeps from dicts or spec files (the coordinator parses and validates
them, with the CLI's parser), follow them, and read their results as pandas
DataFrames; python/README.md has the tour. Install it with pip,
which generates its gRPC modules from proto/ (build_backend/):

    pip install ./python        # into a venv made with --system-site-packages
    python3 -c 'import ranksweep'
"""

import importlib

try:
    importlib.import_module("ranksweep.v1.ranksweep_pb2")  # generated at build time
except ImportError as e:  # pragma: no cover - a source checkout without a build
    raise ImportError(
        "ranksweep: the generated modules ranksweep.v1.ranksweep_pb2 and _pb2_grpc are "
        "missing; `pip install ./python` (or `pip install -e ./python`) makes them from "
        "proto/. The sources in python/ are not importable as they are.") from e

from ranksweep.client import Client, DEFAULT_ADDR, Validation
from ranksweep.errors import RanksweepError, SpecError
from ranksweep.frames import Progress

__all__ = ["Client", "DEFAULT_ADDR", "Progress", "RanksweepError", "SpecError", "Validation"]
