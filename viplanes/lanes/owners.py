"""Who owns the lanes this process made active, so a release can decide before any SQL.

Why (issue 13): a release spent ~0.45 ms on BEGIN IMMEDIATE and the lane's read before its
deletes went out. A lane's owner never changes, so once this process has recorded a lane
``active`` it can tell from memory whether a caller may end it; the deletes then leave right after
the token check, and the write transaction that follows still decides what is stored and answered
(a lane another path ended meanwhile gets a 409 there; its flows are gone either way, which is
what an ended lane wants).

An entry is only a hint that the lane was active with this owner: it is dropped when this process
ends the lane, and ignored once the lane's window has passed (an expired, extended or revoked lane
then takes the read in ``LaneManager.end``). The table stays bounded: when it has doubled since
the last sweep, entries whose window has passed are swept out (amortised O(1) per lane).
"""

from __future__ import annotations

import threading

SWEEP_FROM = 4096  # entries before the first sweep


class ActiveOwners:
    """lane id -> (owner's principal id, the lane's end) for lanes recorded active here."""

    def __init__(self, sweep_from: int = SWEEP_FROM) -> None:
        self._lanes: dict[int, tuple[int, float]] = {}
        self._lock = threading.Lock()
        self._sweep_from = sweep_from
        self._sweep_at = sweep_from

    def add(self, lane_id: int, principal_id: int, expires_at: float, now: float) -> None:
        with self._lock:
            self._lanes[lane_id] = (principal_id, expires_at)
            if len(self._lanes) >= self._sweep_at:
                for stale in [lid for lid, (_, end) in self._lanes.items() if end <= now]:
                    del self._lanes[stale]
                self._sweep_at = max(self._sweep_from, 2 * len(self._lanes))

    def owner(self, lane_id: int, now: float) -> int | None:
        """The owner of a lane recorded active here whose window has not passed, or None."""
        entry = self._lanes.get(lane_id)
        if entry is None or entry[1] <= now:
            return None
        return entry[0]

    def discard(self, lane_id: int) -> None:
        with self._lock:
            self._lanes.pop(lane_id, None)

    def __len__(self) -> int:
        return len(self._lanes)
