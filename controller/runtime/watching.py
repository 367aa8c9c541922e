"""Watch flows on live switches: install, wait, read, remove (``Dataplane.watch_counts``).

The messages are ``controller/compile/watch.py``'s; this part only sends them through the wire
and reads the counters back. The watches are always removed, whatever happened in between.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from viplanes.controller.compile import watch
from viplanes.domain.values import FlowWatch
from viplanes.topologies.model import Topology

WATCH_MAX_S = 2.0  # longer than this would outlive the flows' hard timeout


class WatchWire(Protocol):
    """What this needs of ``wire.Wire``: send with barriers, read flow stats."""

    def apply(self, per_dpid: dict[int, list[Any]], timeout_s: float) -> str | None: ...

    def flow_stats(self, dpid: int, cookie: int, cookie_mask: int, timeout_s: float = 2.0) -> list[Any] | None: ...


def watch_counts(
    wire: WatchWire,
    topology: Topology | None,
    watches: list[FlowWatch],
    seconds: float,
    token: Callable[[], int],
    sleep: Callable[[float], None] = time.sleep,
    timeout_s: float = 2.0,
    change: AbstractContextManager[Any] | None = None,
) -> list[int] | None:
    """Packets each watch counted over ``seconds``; None when a switch is unknown, did not take
    a watch, or did not answer (the caller then takes nothing over). ``change``: the runtime's
    change lock, held for each send (as every write is), never across the wait."""
    lock = change if change is not None else nullcontext()
    if topology is None or not watches or not 0 < seconds <= WATCH_MAX_S:
        return None
    try:
        dpids = [topology.switch(w.switch).dpid for w in watches]
    except StopIteration:  # a switch the topology does not have
        return None
    cookies = [watch.watch_cookie(token() & 0xFFFFFFFF) for _ in watches]
    adds: dict[int, list[Any]] = {}
    for dpid, w, cookie in zip(dpids, watches, cookies, strict=True):
        adds.setdefault(dpid, []).append(watch.compile_watch(w, cookie))
    try:
        with lock:
            failed = wire.apply(adds, timeout_s)
        if failed is not None:
            return None
        sleep(seconds)
        counts: list[int] = []
        for dpid, cookie in zip(dpids, cookies, strict=True):
            n = watch.packets_of(wire.flow_stats(dpid, cookie, watch.EXACT, timeout_s), cookie)
            if n is None:
                return None
            counts.append(n)
        return counts
    finally:
        deletes: dict[int, list[Any]] = {}
        for dpid, cookie in zip(dpids, cookies, strict=True):
            deletes.setdefault(dpid, []).append(watch.compile_watch_delete(cookie))
        with lock:
            wire.apply(deletes, timeout_s)
