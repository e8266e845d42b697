"""The exceptions of the ranksweep client.

Every failed call raises RanksweepError with the gRPC status code and the
coordinator's message, e.g. code NOT_FOUND for an unknown sweep id. A spec
refused raises SpecError, a RanksweepError with code INVALID_ARGUMENT: by the
coordinator (submit or validate answered INVALID_ARGUMENT: an unknown field, a
wrong type, a YAML syntax error, a field out of range, each named in the
message) or, before anything is sent, by the client (a dict that is not JSON,
a file that is not UTF-8). One `except RanksweepError` covers both.
"""

from typing import Any, Optional

import grpc


class RanksweepError(Exception):
    """A failed call: `code` (a grpc.StatusCode), `message` (the status
    message as the coordinator wrote it) and `call` ("submit", "results", ...;
    None for local errors)."""

    def __init__(self, code: grpc.StatusCode, message: str, call: Optional[str] = None) -> None:
        prefix = f"{call}: " if call else ""
        super().__init__(f"{prefix}{code.name}: {message}")
        self.code = code
        self.message = message
        self.call = call

    @classmethod
    def from_rpc(cls, error: Any, call: str) -> "RanksweepError":
        """From the grpc.RpcError a call raised."""
        return cls(error.code(), error.details() or "", call)


class SpecError(RanksweepError):
    """A spec refused (code INVALID_ARGUMENT): `message` names the field or
    the place in the file; `call` is "submit" or "validate" when the
    coordinator refused it, None when the client did before sending it."""

    def __init__(self, message: str, call: Optional[str] = None) -> None:
        super().__init__(grpc.StatusCode.INVALID_ARGUMENT, message, call)
