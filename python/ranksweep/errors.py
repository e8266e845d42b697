"""The exceptions of the ranksweep client.

Every failed call raises RanksweepError with the gRPC status code and the
coordinator's message, e.g. code NOT_FOUND for an unknown sweep id or
INVALID_ARGUMENT naming a spec field and its allowed range. A spec the client
itself rejects (an unknown key, a wrong type) raises SpecError, a
RanksweepError with code INVALID_ARGUMENT, so one `except RanksweepError`
covers both.
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
    """A spec the client refuses before sending it (code INVALID_ARGUMENT)."""

    def __init__(self, message: str) -> None:
        super().__init__(grpc.StatusCode.INVALID_ARGUMENT, message)
