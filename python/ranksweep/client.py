"""Client: the coordinator's SweepService from Python, with DataFrames.

    import ranksweep
    rs = ranksweep.Client()                  # RANKSWEEP_ADDR, RANKSWEEP_TOKEN
    rs.validate("examples/demo.yaml").cells  # what a submit would make, nothing stored
    sweep = rs.submit("examples/demo.yaml")  # or a dict with the same fields
    for p in rs.watch(sweep):
        print(p.done, "/", p.total, p.message)
    df = rs.results(sweep)                   # one row per (head, rank, seed)
    rs.groups(sweep)                         # mean/std/min/max/ci95 per (head, rank)
    rs.summary(sweep)                        # transition rank and theory bounds per head
    rs.quarantine("worker-id")               # admins: invalidate a bad worker's results

Connection settings are the CLI's: the address is `addr`, else
$RANKSWEEP_ADDR, else 127.0.0.1:50051; the token is `token`, else
$RANKSWEEP_TOKEN, sent as "authorization: Bearer TOKEN" (docs/SECURITY.md);
`tls_ca` (a PEM file of the CA that signed the coordinator's certificate)
turns TLS on; each call but watch() has a deadline of `timeout` seconds
(None or 0: none).

Errors: every failed call raises RanksweepError with the gRPC status code and
the coordinator's message; a spec refused (by the coordinator, or before
sending) raises SpecError, a RanksweepError with code INVALID_ARGUMENT.
Thread-safety: a Client may be shared by threads (gRPC channels are); the
iterator watch() returns belongs to one thread.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import numbers
import os
import re
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import grpc
import pandas as pd

from ranksweep import frames
from ranksweep import spec as spec_lib
from ranksweep.errors import RanksweepError, SpecError
from ranksweep.v1 import ranksweep_pb2 as pb
from ranksweep.v1 import ranksweep_pb2_grpc as pb_grpc
from ranksweep.v1 import sweep_admin_pb2 as admin_pb
from ranksweep.v1 import sweep_admin_pb2_grpc as admin_grpc

DEFAULT_ADDR = "127.0.0.1:50051"
# Rows per QueryResults call, as the CLI reads them: each reply stays under
# a MB however large the sweep.
PAGE_SIZE = 10000
# Rows per call with their learning curves (as `ranksweep results --curves`).
CURVES_PAGE_SIZE = 100
# How long watch() keeps reconnecting to a coordinator lost mid-sweep.
DEFAULT_RECONNECT_SECONDS = 300.0

_CHANNEL_OPTIONS = [
    # A large sweep's rows may exceed gRPC's 4 MiB default; accept what the
    # coordinator may send (its --max-message-bytes default, 64 MiB).
    ("grpc.max_receive_message_length", 64 << 20),
    # A lost coordinator is tried again at least every 10 s, so watch()
    # notices a restart soon.
    ("grpc.max_reconnect_backoff_ms", 10000),
]


def _state(arg: str, value: str, enum: Any, prefix: str, allowed: Sequence[str]) -> Any:
    """The enum value of a state name given in any case ("done", "FAILED")."""
    if value.lower() not in allowed:
        raise ValueError(f'{arg}: "{value}" is not one of {", ".join(allowed)}')
    return enum.Value(f"{prefix}{value.upper()}")


_RFC3339 = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
                     r"([Zz]|[+-][0-9]{2}:[0-9]{2})")


# What quarantine() takes as `since`.
Since = Union[None, str, float, datetime.datetime]


def _since_unix_ms(since: Since) -> int:
    """QuarantineWorkerRequest.since_unix_ms of quarantine()'s `since`, read
    as the CLI reads `workers quarantine --since`: Unix seconds >= 0 or an
    RFC 3339 time; from Python also a datetime with a time zone."""
    if since is None:
        return 0
    if isinstance(since, str):
        text = since.strip()
        if re.fullmatch(r"[0-9]+", text):
            return int(text) * 1000
        since = None
        if _RFC3339.fullmatch(text):
            try:
                since = datetime.datetime.fromisoformat(text.upper())
            except ValueError:  # a month 13, a day 32
                pass
        if since is None:
            raise ValueError(f'since: "{text[:64]}" is not an RFC 3339 time '
                             f'(2026-12-01T13:00:00Z) or Unix seconds >= 0')
    if isinstance(since, datetime.datetime):
        if since.tzinfo is None:
            raise ValueError(f"since: {since} has no time zone; give one (e.g. "
                             f"datetime.timezone.utc)")
        ms = math.floor(since.timestamp() * 1000)
    elif isinstance(since, numbers.Real) and not isinstance(since, bool):
        if not math.isfinite(since):
            raise ValueError(f"since: {since} is not a time")
        ms = math.floor(since * 1000)
    else:
        raise TypeError(f"since is None, Unix seconds, a datetime or an RFC 3339 string, not "
                        f"{type(since).__name__}")
    if ms < 0:
        raise ValueError("since: must be 1970 or later")
    return ms


def _group_by(by: Union[str, Sequence[str]], axes: Sequence[str] = ()) -> Any:
    """Groups are per (head, rank, recipe): `by` names head, rank and every
    axis of the sweep, in any order, as the CLI's --group-by does."""
    parts = by.split(",") if isinstance(by, str) else list(by)
    allowed = ["head", "rank"] + list(axes)
    if sorted(p.strip() for p in parts) != sorted(allowed):
        raise ValueError(f'by={by!r} is not supported; use "{",".join(allowed)}"')
    return pb.GROUP_BY_HEAD_RANK


@dataclasses.dataclass(frozen=True)
class Validation:
    """What Client.validate() learns of a spec, as `ranksweep submit
    --dry-run` prints it; nothing is stored.

    spec: the spec as the coordinator reads it, every default filled in, as
      the dict submit() takes (the JSON --dry-run prints); spec_proto: the
      same as a ranksweep.v1.SweepSpec.
    cells: the cells of the full grid (head-with-rank x rank x seed, plus
      head-without-rank x seed, times recipes; a search trains fewer);
      recipes: 1 without axes.
    train_sequences, test_sequences: the dataset's size (0: no test split;
      with dataset axes, the largest recipe's).
    task_memory_bytes, largest_task: an upper-bound estimate of the largest
      task's memory and that task ("kernel/elu1 at rank 64, 3 seeds").
    warnings: valid settings worth a second look, one sentence each, as
      `ranksweep submit` prints them ([] when none)."""

    spec: Dict[str, Any]
    spec_proto: pb.SweepSpec
    cells: int
    recipes: int
    train_sequences: int
    test_sequences: int
    task_memory_bytes: int
    largest_task: str
    warnings: List[str]


class Client:
    """A connection to one coordinator. Close it (or use `with`) when done."""

    def __init__(self, addr: Optional[str] = None, token: Optional[str] = None,
                 tls_ca: Optional[str] = None, timeout: Optional[float] = 30.0) -> None:
        self.addr = addr or os.environ.get("RANKSWEEP_ADDR") or DEFAULT_ADDR
        self._token = token if token is not None else os.environ.get("RANKSWEEP_TOKEN", "")
        self.timeout = timeout or None
        if tls_ca:
            with open(tls_ca, "rb") as f:
                credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
            self._channel = grpc.secure_channel(self.addr, credentials, _CHANNEL_OPTIONS)
        else:
            self._channel = grpc.insecure_channel(self.addr, _CHANNEL_OPTIONS)
        self._stub = pb_grpc.SweepServiceStub(self._channel)
        self._admin = admin_grpc.SweepAdminServiceStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ranksweep.Client(addr={self.addr!r})"

    def _metadata(self) -> tuple:
        return (("authorization", f"Bearer {self._token}"),) if self._token else ()

    def _call(self, what: str, method: Any, request: Any, spec: bool = False) -> Any:
        """method(request) with the deadline and token. Raises RanksweepError
        with the status; with `spec` (a call that carries a spec: submit,
        validate), INVALID_ARGUMENT as SpecError."""
        try:
            return method(request, timeout=self.timeout, metadata=self._metadata())
        except grpc.RpcError as e:
            if spec and e.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise SpecError(e.details() or "", what) from None
            raise RanksweepError.from_rpc(e, what) from None

    # ------------------------------------------------------------ sweeps

    def submit(self, spec: spec_lib.SpecInput) -> str:
        """Submits a sweep and returns its id.

        `spec` is a dict with the fields of the CLI's spec files, the path of
        such a file (YAML or JSON, told apart as the CLI does), or a
        ranksweep.v1.SweepSpec; a dict or a file is sent as its text
        (ranksweep.spec). The coordinator parses it with the CLI's parser and
        validates it: an unknown field, a wrong type, a YAML syntax error or
        a field out of range raises SpecError (INVALID_ARGUMENT, the
        coordinator's message naming the field, or the file's line and
        column), and nothing is stored. OSError for a file that cannot be
        read, TypeError for a spec of another type. Presets are the CLI's
        (`ranksweep submit --preset`)."""
        request = pb.SubmitSweepRequest()
        spec_lib.fill_request(request, spec)
        return str(self._call("submit", self._stub.SubmitSweep, request, spec=True).sweep_id)

    def validate(self, spec: spec_lib.SpecInput) -> Validation:
        """What submit(spec) would make of `spec`, without storing anything:
        the coordinator runs every check a submit runs (parsing, validation,
        the task-memory limit) and returns a Validation: the spec with its
        defaults filled in, its cells and recipes, the dataset's size, the
        largest task's memory and the warnings `ranksweep submit` prints.
        Takes and raises what submit() does, with call "validate"."""
        request = pb.ValidateSweepRequest()
        spec_lib.fill_request(request, spec)
        reply = self._call("validate", self._stub.ValidateSweep, request, spec=True)
        return Validation(spec=json.loads(reply.spec_json), spec_proto=reply.spec,
                          cells=int(reply.cells), recipes=int(reply.recipes),
                          train_sequences=int(reply.train_sequences),
                          test_sequences=int(reply.test_sequences),
                          task_memory_bytes=int(reply.task_memory_bytes),
                          largest_task=str(reply.largest_task),
                          warnings=[str(w) for w in reply.warnings])

    def spec(self, sweep_id: str) -> Dict[str, Any]:
        """The sweep's spec as the coordinator stored it, every field
        resolved, as the dict submit() takes: the coordinator's JSON
        (GetSweepResponse.spec_json), the very JSON `ranksweep submit
        --dry-run` prints, recipe axes as lists where their field stood.
        `submit(rs.spec(sweep))` submits the same sweep again. Raises
        RanksweepError (NOT_FOUND for an unknown id)."""
        reply = self._call("spec", self._stub.GetSweep, pb.GetSweepRequest(sweep_id=sweep_id))
        if not reply.spec_json:
            raise RanksweepError(grpc.StatusCode.UNIMPLEMENTED,
                                 "the coordinator sent no spec_json; it is older than this "
                                 "client (spec_proto() reads its spec)", "spec")
        spec: Dict[str, Any] = json.loads(reply.spec_json)
        return spec

    def spec_proto(self, sweep_id: str) -> pb.SweepSpec:
        """The stored spec as the ranksweep.v1.SweepSpec message, as the
        frames' recipe_label() and recipe_values() take it."""
        return self._spec("spec", sweep_id)

    def _spec(self, what: str, sweep_id: str) -> pb.SweepSpec:
        # `what` names the caller's call in a RanksweepError.
        reply = self._call(what, self._stub.GetSweep, pb.GetSweepRequest(sweep_id=sweep_id))
        spec: pb.SweepSpec = reply.sweep.spec
        return spec

    def status(self, sweep_id: str) -> Dict[str, Any]:
        """One sweep as a dict of the list() columns (counts, state, times)."""
        reply = self._call("status", self._stub.GetSweep, pb.GetSweepRequest(sweep_id=sweep_id))
        row: Dict[str, Any] = frames.sweeps_frame([reply.sweep]).iloc[0].to_dict()
        return row

    def list(self, state: Optional[str] = None, limit: int = 0, tag: Optional[str] = None,
             search: Optional[str] = None, include_archived: bool = False) -> pd.DataFrame:
        """Sweeps, newest first, as a DataFrame: frames.SWEEP_COLUMNS, then
        `tags` (a list), `note` (None when there is none) and `archived`, as
        `ranksweep list` lists them. `state` filters ("running", "done",
        "failed", "cancelled"); `tag` keeps the sweeps with that tag;
        `search` those whose id, name, owner, note or a tag contains it (any
        case); archived sweeps only with `include_archived`. `limit` 0 is
        the coordinator's default (100), applied after the filters."""
        request = admin_pb.ListManagedSweepsRequest(
            limit=limit, tag=tag or "", search=search or "", include_archived=include_archived)
        if state:
            request.state = _state("state", state, pb.SweepState, "SWEEP_STATE_",
                                   ("running", "done", "failed", "cancelled"))
        reply = self._call("list", self._admin.ListManagedSweeps, request)
        frame = frames.sweeps_frame([m.sweep for m in reply.sweeps])
        frame["tags"] = [list(m.tags) for m in reply.sweeps]
        frame["note"] = [m.note or None for m in reply.sweeps]
        frame["archived"] = [m.archived for m in reply.sweeps]
        return frame

    # ------------------------------------------------------------ managing sweeps

    def _update(self, what: str, request: Any) -> Dict[str, Any]:
        s = self._call(what, self._admin.UpdateSweep, request).sweep
        return {"sweep_id": s.sweep.sweep_id, "name": s.sweep.name, "note": s.note or None,
                "tags": list(s.tags), "archived": s.archived}

    def note(self, sweep_id: str, text: str) -> Dict[str, Any]:
        """Sets the sweep's note ("" clears it; at most 4096 bytes), as
        `ranksweep sweep note`. Returns the sweep's sweep_id, name, note, tags
        and archived mark. Owner or admin (PERMISSION_DENIED otherwise)."""
        return self._update("note", admin_pb.UpdateSweepRequest(sweep_id=sweep_id, note=text))

    def tag(self, sweep_id: str, *tags: str) -> Dict[str, Any]:
        """Adds tags (each 1..64 characters of A-Z a-z 0-9 . _ : -; at most 32
        per sweep), as `ranksweep sweep tag`; returns what note() returns."""
        return self._update("tag", admin_pb.UpdateSweepRequest(sweep_id=sweep_id,
                                                               add_tags=list(tags)))

    def untag(self, sweep_id: str, *tags: str) -> Dict[str, Any]:
        """Removes tags (`ranksweep sweep tag --remove`)."""
        return self._update("untag", admin_pb.UpdateSweepRequest(sweep_id=sweep_id,
                                                                 remove_tags=list(tags)))

    def rename(self, sweep_id: str, name: str) -> Dict[str, Any]:
        """Gives the sweep a new name (the spec's rule: 1..128 characters of
        A-Z a-z 0-9 . _ -), as `ranksweep sweep rename`."""
        return self._update("rename", admin_pb.UpdateSweepRequest(sweep_id=sweep_id, name=name))

    def archive(self, sweep_id: str, archived: bool = True) -> Dict[str, Any]:
        """Hides the sweep from list() (kept, and still found by id);
        archived=False shows it again. `ranksweep sweep archive [--undo]`."""
        return self._update("archive", admin_pb.UpdateSweepRequest(sweep_id=sweep_id,
                                                                   archived=archived))

    def delete(self, sweep_id: str, confirm: str) -> Dict[str, int]:
        """Deletes an ended sweep, its cells and its results, as `ranksweep
        sweep delete`: `confirm` must repeat the sweep id (FAILED_PRECONDITION
        otherwise, and for a running sweep: cancel it first). Owner or admin.
        Returns cells_deleted and results_deleted."""
        reply = self._call("delete", self._admin.DeleteSweep,
                           admin_pb.DeleteSweepRequest(sweep_id=sweep_id, confirm=confirm))
        return {"cells_deleted": reply.cells_deleted, "results_deleted": reply.results_deleted}

    def retry(self, sweep_id: str, failed: bool = True, cancelled: bool = True) -> int:
        """New attempts for the sweep's FAILED and/or CANCELLED cells, as
        `ranksweep sweep retry`: they are pending again, the sweep RUNNING;
        nothing else is trained again. Returns the cells retried."""
        reply = self._call("retry", self._admin.RetrySweep,
                           admin_pb.RetrySweepRequest(sweep_id=sweep_id, failed=failed,
                                                      cancelled=cancelled))
        return int(reply.cells_retried)

    def cancel(self, sweep_id: str) -> int:
        """Cancels a sweep's unfinished cells; returns how many were cancelled."""
        reply = self._call("cancel", self._stub.CancelSweep,
                           pb.CancelSweepRequest(sweep_id=sweep_id))
        return int(reply.cells_cancelled)

    def workers(self) -> pd.DataFrame:
        """The worker pool as a DataFrame (frames.WORKER_COLUMNS)."""
        reply = self._call("workers", self._stub.ListWorkers, pb.ListWorkersRequest())
        return frames.workers_frame(reply.workers)

    def quarantine(self, worker_id: str, since: Since = None,
                   hold_token: bool = False) -> Dict[str, Any]:
        """Invalidates the DONE results `worker_id` trained (those finished at
        or after `since`: None for all, Unix seconds, an RFC 3339 string or a
        datetime with a time zone) and every copy the result cache served of
        them, as `ranksweep workers quarantine` does: the rows leave the
        results, groups and summaries (results(include_invalid=True) still
        shows them, state INVALID), and their cells are pending again for
        another worker. One transaction. Admin only: PERMISSION_DENIED for
        any other token (docs/SECURITY.md); NOT_FOUND for a worker that
        never registered. Returns the counts as a dict: quarantine_id,
        results_invalidated, copies_invalidated, cells_reset,
        sweeps_reopened (ids of done or failed sweeps now running again) and
        token_held. With hold_token, the token that registered the worker is
        held too (`--token`): every worker of it, also ones registered later,
        is refused until the worker is unquarantined; token_held names it."""
        request = pb.QuarantineWorkerRequest(worker_id=worker_id,
                                             since_unix_ms=_since_unix_ms(since),
                                             hold_token=hold_token)
        reply = self._call("quarantine", self._stub.QuarantineWorker, request)
        return {"quarantine_id": reply.quarantine_id,
                "results_invalidated": reply.results_invalidated,
                "copies_invalidated": reply.copies_invalidated,
                "cells_reset": reply.cells_reset,
                "sweeps_reopened": list(reply.sweeps_reopened),
                "token_held": reply.token_held}

    def watch(self, sweep_id: str,
              reconnect: float = DEFAULT_RECONNECT_SECONDS) -> Iterator[frames.Progress]:
        """Yields a frames.Progress at once, whenever a cell of the sweep
        changes state, and a last time when the sweep ends (Progress.ended);
        then the iteration stops. A coordinator lost mid-sweep (a restart) is
        reconnected to for up to `reconnect` seconds (0: not at all), as the
        CLI's watch does; nothing is missed but the messages of the gap.
        Raises RanksweepError (NOT_FOUND for an unknown id)."""
        request = pb.WatchSweepRequest(sweep_id=sweep_id)
        last = None
        lost_at = None
        backoff = 1.0
        while True:
            stream = self._stub.WatchSweep(request, metadata=self._metadata())
            try:
                for event in stream:
                    lost_at = None
                    backoff = 1.0
                    last = frames.progress_from_event(event)
                    yield last
                return
            except grpc.RpcError as e:
                lost = (e.code() == grpc.StatusCode.UNAVAILABLE and last is not None
                        and not last.ended)
                now = time.monotonic()
                if lost_at is None:
                    lost_at = now
                if not lost or reconnect <= 0 or now - lost_at >= reconnect:
                    raise RanksweepError.from_rpc(e, "watch") from None
            finally:
                stream.cancel()
            time.sleep(backoff)
            backoff = min(backoff * 2, 10.0)

    def wait(self, sweep_id: str,
             reconnect: float = DEFAULT_RECONNECT_SECONDS) -> Optional[frames.Progress]:
        """Follows the sweep until it ends; returns its last Progress."""
        last = None
        for last in self.watch(sweep_id, reconnect):
            pass
        return last

    # ------------------------------------------------------------ results

    @staticmethod
    def _query(sweep_id: str, head: Optional[str], ranks: Optional[Sequence[int]],
               seeds: Optional[Sequence[int]]) -> pb.QueryResultsRequest:
        request = pb.QueryResultsRequest(sweep_id=sweep_id, head=head or "")
        request.ranks.extend(ranks or ())
        request.seeds.extend(seeds or ())
        return request

    def results(self, sweep_id: str, head: Optional[str] = None,
                ranks: Optional[Sequence[int]] = None, seeds: Optional[Sequence[int]] = None,
                state: Optional[str] = None, include_invalid: bool = False,
                page_size: int = PAGE_SIZE) -> pd.DataFrame:
        """Per-seed results: one row per finished (done, failed or pruned) cell, in
        cell id order, as a DataFrame (frames.result_columns: the fixed
        columns, one per optional metric of the coordinator, `recipe`; missing
        values are NaN / <NA> / None, see ranksweep.frames). Filters: `head` label
        ("kernel/elu1"), `ranks`, `seeds`, `state` ("done", "failed",
        "pruned" for the cells recipe pruning stopped, or "invalid" for the
        invalidated rows only).

        `include_invalid` appends the rows a quarantine invalidated, as
        `ranksweep results --include-invalid` does: state INVALID, their
        metrics as they were stored, and in `failure` who invalidated them
        and when. They never count in groups() or summary().

        With recipe axes, `recipe` and one column per axis say which recipe
        each row trained, as the CLI's CSV does."""
        spec = self._spec("results", sweep_id)
        request = self._query(sweep_id, head, ranks, seeds)
        if state:
            request.state = _state("state", state, pb.CellState, "CELL_STATE_",
                                   ("done", "failed", "pruned", "invalid"))
        request.page_size = page_size
        request.columns = True
        requests = [request]
        if include_invalid and request.state != pb.CELL_STATE_INVALID:
            invalid = pb.QueryResultsRequest()
            invalid.CopyFrom(request)
            invalid.state = pb.CELL_STATE_INVALID
            requests.append(invalid)
        replies = [r for request in requests for r in self._pages("results", request)]
        return frames.results_frame(replies, spec)

    def _pages(self, what: str, request: pb.QueryResultsRequest) -> List[Any]:
        """Every reply of a rows query, a page at a time (request's page_token
        moves on)."""
        replies = []
        while True:
            reply = self._call(what, self._stub.QueryResults, request)
            replies.append(reply)
            if not reply.next_page_token:
                return replies
            request.page_token = reply.next_page_token

    def curves(self, sweep_id: str, head: Optional[str] = None,
               ranks: Optional[Sequence[int]] = None,
               seeds: Optional[Sequence[int]] = None) -> pd.DataFrame:
        """Learning curves: one row per evaluation (every eval_every steps,
        and the last) of each done seed, as a long DataFrame
        (frames.CURVE_COLUMNS: step, loss, train and test error and position
        accuracy; then `recipe` and the axes). Filters as results(). For a
        plot: ``rs.curves(id).groupby(["head", "rank", "step"]).train_error
        .mean()``."""
        spec = self._spec("curves", sweep_id)
        request = self._query(sweep_id, head, ranks, seeds)
        request.state = pb.CELL_STATE_DONE
        request.curves = True
        request.page_size = CURVES_PAGE_SIZE
        return frames.curves_frame(self._pages("curves", request), spec)

    def _grouped(self, what: str, sweep_id: str, head: Optional[str],
                 ranks: Optional[Sequence[int]], seeds: Optional[Sequence[int]],
                 criterion: Optional[str] = None) -> pb.QueryResultsResponse:
        request = self._query(sweep_id, head, ranks, seeds)
        request.group_by = pb.GROUP_BY_HEAD_RANK
        request.criterion = criterion or ""
        return self._call(what, self._stub.QueryResults, request)

    def groups(self, sweep_id: str, by: Union[str, Sequence[str]] = "head,rank",
               head: Optional[str] = None, ranks: Optional[Sequence[int]] = None,
               seeds: Optional[Sequence[int]] = None,
               criterion: Optional[str] = None) -> pd.DataFrame:
        """Per-(head, rank, recipe) aggregates over seeds as a DataFrame
        (frames.group_columns(spec)): the recipe and its axes' values, n,
        expected, exact seeds, missing seeds, the verdict under `criterion`
        (as summary() takes it) and mean/std/min/max/ci95 of the train and
        test errors and accuracies. `by` is "head,rank", the one grouping
        the coordinator computes, with the sweep's axes named too
        ("head,rank,lr"); every recipe is its own group."""
        spec = self._spec("groups", sweep_id)
        _group_by(by, [a.name for a in spec.axes])
        return frames.groups_frame(
            self._grouped("groups", sweep_id, head, ranks, seeds, criterion), spec)

    def summary(self, sweep_id: str, head: Optional[str] = None,
                ranks: Optional[Sequence[int]] = None, seeds: Optional[Sequence[int]] = None,
                criterion: Optional[str] = None) -> pd.DataFrame:
        """Per head, the transition rank (the smallest swept rank that meets
        the criterion, docs/ANALYSIS.md) or why it is undefined, and the
        dataset's theory bounds, as `ranksweep results --summary` prints
        them (frames.SUMMARY_COLUMNS). `criterion` is "all" (every seed
        exact; the default), "mean:X" or "seeds:K", as `--criterion` takes
        it; the coordinator rejects a bad one with INVALID_ARGUMENT. The
        coordinator computes it; filters change it as they change the groups
        it is computed over."""
        return frames.summary_frame(
            self._grouped("summary", sweep_id, head, ranks, seeds, criterion))
