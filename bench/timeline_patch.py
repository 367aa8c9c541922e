"""``BENCH_PATCH=timeline``: perf_counter stamps along one request inside ``viplanes serve``.

Measurement only (bench/serve_patched.py applies it; the product has no hooks): wraps the
functions a lane request passes through and appends (name, perf_counter, thread) to a list; when
waitress has written a response, the stamps since the previous response are written as one JSON
line to $BENCH_TIMELINE (after the answer is out, so the write is not in the measured path).
perf_counter is CLOCK_MONOTONIC, so the stamps line up with the client's and the FlowWatch's.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

_stamps: list[tuple[str, float, str]] = []


def stamp(name: str) -> None:
    _stamps.append((name, time.perf_counter(), threading.current_thread().name))


def _wrap(
    owner: Any, attr: str, before: str | None, after: str | None, when: Callable[[Any], bool] = lambda result: True
) -> None:
    original = getattr(owner, attr)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if before:
            stamp(before)
        result = original(*args, **kwargs)
        if after and when(result):
            stamp(after)
        return result

    setattr(owner, attr, wrapper)


def install() -> None:
    from waitress.channel import HTTPChannel

    from viplanes.api import lanes as api_lanes
    from viplanes.controller.openflow import tls as oftls
    from viplanes.controller.openflow.server import GuardedDatapath
    from viplanes.controller.runtime import batch, switches, wire
    from viplanes.controller.runtime import lane_runtime as runtime
    from viplanes.lanes import activation as lane_activation
    from viplanes.lanes import manager as lanes

    out = open(os.environ["BENCH_TIMELINE"], "a", buffering=1)
    lock = threading.Lock()

    _wrap(HTTPChannel, "received", "http read", None)
    _wrap(HTTPChannel, "service", "worker start", "worker done")
    _wrap(api_lanes, "caller", "view (auth start)", "auth done")
    _wrap(lanes.LaneManager, "request", "manager request", None)
    _wrap(lanes.LaneManager, "target_of", None, "target resolved")
    _wrap(lanes.Database, "write_connection", "write connection asked", None)
    _wrap(lanes, "usable_grant_rules", "transaction open", "grants read")
    _wrap(lanes.LaneManager, "_insert", "decided", "decided + inserted")
    _wrap(lane_activation.LaneActivation, "_activate", "committed installing", "activation recorded")
    _wrap(lane_activation.LaneActivation, "_record", None, "active written (before commit)")
    _wrap(lane_activation.LaneActivation, "_deactivate", "committed released", "deactivated")
    _wrap(lanes, "lane_row_for_change", "lane read start", "lane read")
    _wrap(lanes.LaneManager, "_begin_removal", "owner checked", "deletes sent (before commit)")
    _wrap(lanes, "end_lane", None, "released written (before commit)")
    _wrap(runtime.LaneRuntime, "activate", "runtime activate", None)
    _wrap(batch.Changes, "_compile_to_send", "change lock taken", "compiled")
    _wrap(switches.SwitchState, "touch", "change lock taken (removal)", None)
    _wrap(batch.Changes, "_send", "apply start", None)
    _wrap(batch.Changes, "_finish", None, "barriers all answered")
    _wrap(runtime.compiler, "compile_lane_removal", None, "removal compiled")
    _wrap(wire.Wire, "stage", None, "batch staged")
    _wrap(GuardedDatapath, "serialize_batch", "batch serialise", None)
    _wrap(oftls.TLSChannel, "sendall", "tls write", "tls written")
    _wrap(runtime.LaneRuntime, "on_barrier_reply", "barrier reply (app thread)", None)

    original_flush = HTTPChannel._flush_some

    def flush_some(self: Any, *args: Any, **kwargs: Any) -> Any:
        sent = original_flush(self, *args, **kwargs)
        if sent and not self.total_outbufs_len:
            stamp("response sent")
            with lock:
                batch = list(_stamps)
                del _stamps[: len(batch)]
            out.write(json.dumps(batch) + "\n")
        return sent

    HTTPChannel._flush_some = flush_some
