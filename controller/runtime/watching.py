"""Watch flows on live switches: install, wait, read, remove (``Dataplane.watch_counts``).

The messages are ``controller/compile/watch.py``'s; this part only sends them through the wire
and reads the counters back. The watches are always removed, whatever happened in between.

``watches`` come upstream first (the access switch's, then the border's). Marked watches rewrite
DSCP (the first sets a nonce, the last puts the original back), so a nonce must never leave the
campus: the watches go in downstream first and come out upstream first, one switch's barrier
after another, and each one's hard timeout is a second longer than the one before it (should
the controller die between install and delete, the mark still ends before its restore).

The drain: a marked connection behind a rate cap (the campus firewall's) has marked packets
queued between the two switches when the counters are read, so the border counted fewer than the
access switch marked (768 marked, 486 out; 680/478). When the border's counts (the proposed tuple
plus the strays) fall short of the marked count, an unmarking flow goes over the marking watch
(``compile_unmark``: nothing more is marked, its counter stops), and the counts are read again
every ``DRAIN_STEP_S`` until the border has counted about as many as were marked, ``DRAIN_MAX_S``
at most (the queue drains, and Open vSwitch pushes its datapath's counts to the rules every
~0.5 s). Nothing a forger can use: no packet is marked after the unmark, the counts compared are
the same three, and the strays (marked packets leaving by another NAT port) count over the drain
too (``viplanes.auto.natmap.confirmed``).
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
DRAIN_STEP_S = 0.2  # between two reads while queued marked packets come out at the border
DRAIN_MAX_S = 1.0  # a queue of ~300 packets behind a 15 Mbit/s cap + one counter push (~0.5 s)
DRAIN_SLACK = 8  # packets in flight between the switches: no drain for those


def short_of(marked: int, out: int) -> bool:
    """The border counted (``out``: restored on the proposed tuple + strays) clearly fewer than
    the access switch marked: more than a tenth and ``DRAIN_SLACK`` packets are still queued."""
    return out + DRAIN_SLACK + marked // 10 < marked


def drain_budget(seconds: float) -> float:
    """How long the drain may wait: ``DRAIN_MAX_S``, less what would bring the marking watch
    within a second of its hard timeout (then it could vanish before it is read)."""
    return max(0.0, min(DRAIN_MAX_S, watch.WATCH_HARD_TIMEOUT_S - 1.0 - seconds))


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
        counts = _read(wire, steps, timeout_s)
        if counts is None or len(steps) < 2 or watches[0].mark is None or not short_of(counts[0], sum(counts[1:])):
            return counts
        unmark = watch.watch_cookie(token() & 0xFFFFFFFF)
        installed.insert(0, (dpids[0], unmark))  # removed last: it marks nothing
        with lock:
            failed = wire.apply({dpids[0]: [watch.compile_unmark(watches[0], unmark)]}, timeout_s)
        if failed is not None:
            return counts
        waited, budget = 0.0, drain_budget(seconds)
        while waited < budget:
            sleep(DRAIN_STEP_S)
            waited += DRAIN_STEP_S
            counts = _read(wire, steps, timeout_s)
            if counts is None or not short_of(counts[0], sum(counts[1:])):
                break
        return counts
    finally:
        for dpid, cookie in reversed(installed):  # upstream first: no nonce left unrestored
            with lock:
                wire.apply({dpid: [watch.compile_watch_delete(cookie)]}, timeout_s)


def _read(wire: WatchWire, steps: list[tuple[int, FlowWatch, int]], timeout_s: float) -> list[int] | None:
    """Every watch's packet count, in order; None if one is missing."""
    counts: list[int] = []
    for dpid, _, cookie in steps:
        n = watch.packets_of(wire.flow_stats(dpid, cookie, watch.EXACT, timeout_s), cookie)
        if n is None:
            return None
        counts.append(n)
    return counts
