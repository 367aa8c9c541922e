"""Watch flows on live switches: install, wait, read, remove (``Dataplane.watch_counts``).

The messages are ``controller/compile/watch.py``'s; this part only sends them through the wire
and reads the counters back. The watches are always removed, whatever happened in between.

``watches`` come upstream first (the access switch's, then the border's). Marked watches rewrite
DSCP (the first sets a nonce, the last puts the original back), so a nonce must never leave the
campus: the watches go in downstream first and come out upstream first, one switch's barrier
after another, and each one's hard timeout is a second longer than the one before it (should
the controller die between install and delete, the mark still ends before its restore).
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
    steps = list(zip(dpids, watches, cookies, strict=True))
    installed: list[tuple[int, int]] = []  # (dpid, cookie), in the order they went in
    try:
        for i, (dpid, w, cookie) in reversed(list(enumerate(steps))):
            flow = watch.compile_watch(w, cookie, hard_timeout=watch.WATCH_HARD_TIMEOUT_S + i)
            installed.append((dpid, cookie))
            with lock:
                failed = wire.apply({dpid: [flow]}, timeout_s)
            if failed is not None:
                return None
        sleep(seconds)
        counts: list[int] = []
        for dpid, _, cookie in steps:
            n = watch.packets_of(wire.flow_stats(dpid, cookie, watch.EXACT, timeout_s), cookie)
            if n is None:
                return None
            counts.append(n)
        return counts
    finally:
        for dpid, cookie in reversed(installed):  # upstream first: no nonce left unrestored
            with lock:
                wire.apply({dpid: [watch.compile_watch_delete(cookie)]}, timeout_s)
