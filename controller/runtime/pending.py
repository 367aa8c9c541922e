"""Waiting for switches to answer: barriers (with errors for the messages before them) and
flow-stats replies. No I/O: the app reports replies, callers wait on the returned objects.

A batch to one switch is "confirmed" when its barrier reply arrives and no error named one of its
xids first (OpenFlow processes messages before a barrier before answering it, and an error
carries the xid of the message that failed).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Batch:
    dpid: int
    xids: frozenset[int]
    barrier_xid: int
    done: threading.Event = field(default_factory=threading.Event)
    error: str | None = None
    errors: list[tuple[int, int, int]] = field(default_factory=list)  # (xid, type, code)
    lost: str | None = None  # the switch went away before the barrier reply: why

    def wait(self, deadline: float) -> bool:
        return self.done.wait(max(0.0, deadline - time.monotonic()))


@dataclass
class StatsRequest:
    dpid: int
    xid: int
    body: list[Any] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    error: str | None = None
    asked: float = field(default_factory=time.monotonic)
    last_part: float | None = None  # when the latest part of a reply in several came

    def wait_left(self, idle_s: float, now: float) -> float:
        return wait_left(self.asked, self.last_part, now, idle_s, PARTS_CAP * idle_s)


# A reply in several parts that keeps coming is not a switch that does not answer: an ask waits
# ``idle_s`` after the request or its latest part, up to this many times ``idle_s`` in all. OVS
# answers OFPMP_TABLE_FEATURES in ~21 parts; a fixed 5 s for the whole of it dropped every
# switch's answer while four switches connected on a loaded machine (the last part came 0.4 s late).
PARTS_CAP = 4.0


def wait_left(asked: float, last_part: float | None, now: float, idle_s: float, cap_s: float) -> float:
    """Seconds an ask may still wait for the rest of its reply (0: give up)."""
    since = asked if last_part is None else last_part
    return max(0.0, min(since + idle_s, asked + cap_s) - now)


class Tracker:
    """Outstanding batches and stats requests, keyed by (dpid, xid). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batches: dict[tuple[int, int], Batch] = {}  # every xid of a batch -> the batch
        self._stats: dict[tuple[int, int], StatsRequest] = {}

    def expect_barrier(self, dpid: int, xids: list[int], barrier_xid: int) -> Batch:
        batch = Batch(dpid, frozenset(xids), barrier_xid)
        with self._lock:
            for xid in (*xids, barrier_xid):
                self._batches[(dpid, xid)] = batch
        return batch

    def expect_stats(self, dpid: int, xid: int) -> StatsRequest:
        req = StatsRequest(dpid, xid)
        with self._lock:
            self._stats[(dpid, xid)] = req
        return req

    def forget(self, *items: Batch | StatsRequest) -> None:
        with self._lock:
            for item in items:
                if isinstance(item, Batch):
                    for xid in (*item.xids, item.barrier_xid):
                        self._batches.pop((item.dpid, xid), None)
                else:
                    self._stats.pop((item.dpid, item.xid), None)

    # ---- replies (called from the app's event thread) ------------------------------------------
    def barrier_reply(self, dpid: int, xid: int) -> None:
        with self._lock:
            batch = self._batches.get((dpid, xid))
        if batch is not None and batch.barrier_xid == xid:
            self.forget(batch)
            batch.done.set()

    def error(self, dpid: int, xid: int, err_type: int, code: int, reason: str) -> bool:
        """An OFPErrorMsg; True when it belonged to one of our batches or requests."""
        with self._lock:
            batch = self._batches.get((dpid, xid))
            stats = self._stats.pop((dpid, xid), None)
        if batch is not None:
            batch.errors.append((xid, err_type, code))
            if batch.error is None:
                batch.error = reason
            return True
        if stats is not None:
            stats.error = reason
            stats.done.set()
            return True
        return False

    def stats_reply(self, dpid: int, xid: int, body: list[Any], more: bool) -> None:
        with self._lock:
            req = self._stats.get((dpid, xid))
            if req is None:
                return
            req.body.extend(body)
            req.last_part = time.monotonic()
            if not more:
                del self._stats[(dpid, xid)]
        if not more:
            req.done.set()

    def disconnected(self, dpid: int, reason: str) -> None:
        with self._lock:
            batches = {id(b): b for (d, _), b in self._batches.items() if d == dpid}
            stats = [r for (d, _), r in self._stats.items() if d == dpid]
            for key in [k for k in self._batches if k[0] == dpid]:
                del self._batches[key]
            for key in [k for k in self._stats if k[0] == dpid]:
                del self._stats[key]
        for batch in batches.values():
            batch.lost = reason
            batch.error = batch.error or reason
            batch.done.set()
        for req in stats:
            req.error = reason
            req.done.set()

    def outstanding(self) -> int:
        with self._lock:
            return len({id(b) for b in self._batches.values()}) + len(self._stats)
