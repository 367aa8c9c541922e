"""Watch flows on live switches: install, wait, read, remove (``Dataplane.watch_counts``).

The messages are ``controller/compile/watch.py``'s; this part only sends them through the wire
and reads the counters back. The watches are always removed, whatever happened in between.

``watches`` come upstream first (the access switch's, then the border's). Marked watches rewrite
DSCP (the first sets a nonce, the last puts the original back), so a nonce must never leave the
campus: the watches go in downstream first and come out upstream first, one switch's barrier
after another, and each one's hard timeout is a second longer than the one before it (should
the controller die between install and delete, the mark still ends before its restore).

The drain: marked packets are still on their way to the border when the access switch's counter
says they were marked (the campus firewall's queue, the userspace datapath's receive queues on a
busy machine, the counters' refresh), so a true mapping read at once can come out short (768
marked, 486 out). When the first reading does not settle the matter, an unmarking flow goes over
the marking watch (``compile_unmark``: nothing more is marked, its counter stops), and the
counters are read again every ``DRAIN_STEP_S`` until ``viplanes.domain.natproof.judge`` gives a
final answer: the counts agree, marked packets left by another port, or nothing changed for
``natproof.SETTLE_S`` (the queue is out); ``DRAIN_MAX_S`` after the first read at most, by the
clock (reads on a busy machine take time too). The acceptor judges the last reading with the same
``confirmed``: waiting longer never confirms what a forger proposes (natproof's docstring).
A verdict at the first reading with marked packets still on their way (a forger refused while its
victim's packets queue behind the firewall) also stops the marking first and keeps the restores
until the border has counted them (``_flush``): removed at once, they let those packets leave the
campus with the nonce.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from viplanes.controller.compile import watch
from viplanes.domain.natproof import Reading, Verdict, judge
from viplanes.domain.values import FlowWatch
from viplanes.topologies.model import Topology

log = logging.getLogger(__name__)

WATCH_MAX_S = 2.0  # longer than this would outlive the flows' hard timeout
DRAIN_STEP_S = 0.2  # between two reads while marked packets come out at the border
DRAIN_MAX_S = 1.6  # after the first read: a takeover then still lands within ~3 s of the sighting


def drain_budget(seconds: float) -> float:
    """How long after the first read the drain may read: ``DRAIN_MAX_S``, less what would bring
    the marking watch within a second of its hard timeout (then it could vanish before it is read)."""
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
    clock: Callable[[], float] = time.monotonic,
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
        t0 = clock()
        counts = _read(wire, steps, timeout_s)
        if counts is None or len(steps) < 2 or watches[0].mark is None:
            return counts
        readings = [Reading.of(0.0, counts, marking=True)]
        budget = drain_budget(seconds)
        final = judge(readings, budget) is not Verdict.WAIT
        if final and counts[0] <= sum(counts[1:]):
            return counts
        unmark = watch.watch_cookie(token() & 0xFFFFFFFF)
        installed.insert(0, (dpids[0], unmark))  # removed last: it marks nothing
        with lock:
            failed = wire.apply({dpids[0]: [watch.compile_unmark(watches[0], unmark)]}, timeout_s)
        if failed is not None:
            return counts
        if final:  # decided, but marked packets are still on their way: let them meet a restore
            _flush(wire, steps, timeout_s, sleep, clock, t0 + budget)
            return counts
        verdict = Verdict.WAIT
        while verdict is Verdict.WAIT:
            sleep(DRAIN_STEP_S)
            counts = _read(wire, steps, timeout_s)
            if counts is None:  # a watch vanished or a switch did not answer: nothing proved
                return None
            readings.append(Reading.of(round(clock() - t0, 3), counts, marking=False))
            verdict = judge(readings, budget)
        log.log(
            logging.INFO if verdict is Verdict.CONFIRMED else logging.WARNING,
            "NAT watch drained: %s after %d reads, (s, marked, proposed, strays): %s",
            verdict,
            len(readings),
            [(r.at, r.marked, r.proposed, r.strays) for r in readings],
        )
        return counts
    finally:
        for dpid, cookie in reversed(installed):  # upstream first: no nonce left unrestored
            with lock:
                wire.apply({dpid: [watch.compile_watch_delete(cookie)]}, timeout_s)


def _flush(
    wire: WatchWire,
    steps: list[tuple[int, FlowWatch, int]],
    timeout_s: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    deadline: float,
) -> None:
    """A verdict came at the first reading while the border's restores had counted fewer packets
    than were marked (a forger refused at once, its victim's marked packets still queued behind
    the firewall). Removing the restores now would let those leave the campus with the nonce, so
    the marking is stopped (the caller's unmark) and the counters are read until the restores
    caught up, stopped growing for a step, or the drain's time is out."""
    last = -1
    while clock() < deadline:
        sleep(DRAIN_STEP_S)
        counts = _read(wire, steps, timeout_s)
        if counts is None:
            return
        restored = sum(counts[1:])
        if restored >= counts[0] or restored == last:
            return
        last = restored


def _read(wire: WatchWire, steps: list[tuple[int, FlowWatch, int]], timeout_s: float) -> list[int] | None:
    """Every watch's packet count, in order; None if one is missing."""
    counts: list[int] = []
    for dpid, _, cookie in steps:
        n = watch.packets_of(wire.flow_stats(dpid, cookie, watch.EXACT, timeout_s), cookie)
        if n is None:
            return None
        counts.append(n)
    return counts
