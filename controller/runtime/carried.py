"""The lanes the runtime carries, with an index of who needs each shared per-address flow.

Shared flows (``sharedflows``: the border's ARP reply for a lane-pool address, ICMP transit
towards a host) are installed with the first live lane of an address and deleted with its last.
Deciding "was this the last one?" by recomputing the shared flows of every carried lane made
each release cost O(live lanes) (issue 13: 22 ms of serve CPU per release at 150 live lanes).
``CarriedLanes`` is the runtime's ``lanes`` dict and keeps, per (dpid, address), how many
carried lanes need that address's shared flows there, updated on every insert, replace and
delete whichever code path makes it (activate, release, a batch, a reconcile's update, the
periodic round's deletes). A release then asks ``orphaned`` in O(its own flows). Reconcile stays
the source of truth: it rebuilds the desired flows from the database's lane set, not from here.

Each lane's shared flows depend only on its source, its lane address and the path, so they are
compiled once per (source, lane address) pair over the runtime's current view of the topology
(links down left out: ``set_view`` when a re-route swaps it, which counts every lane's needs
again) and the messages reused: ADD of the same flow is idempotent
and a cached message that already carries an xid is sent as a copy (``wire.with_xids``, ``batch.merge``).
Not thread-safe by itself: the runtime changes it under its change lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from viplanes.controller.compile import shared as sharedflows
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology

OFMsgs = list[Any]
Need = tuple[int, str]  # (dpid, address) of a shared flow set a lane needs
SharedByAddress = dict[str, dict[int, OFMsgs]]


class CarriedLanes(dict[int, LaneSpec]):
    """lane id -> LaneSpec (a dict), plus per (dpid, address) the number of lanes needing it."""

    def __init__(self, topology: Topology | None) -> None:
        super().__init__()
        self._topology = topology
        self._users: dict[Need, int] = {}
        self._nat_users: dict[str, int] = {}  # lane-pool address -> carried lanes using it
        self._compiled: dict[tuple[str, Any, Any], tuple[SharedByAddress, tuple[Need, ...]]] = {}

    # ---- what a lane needs (compiled once per source and lane address) ----------------------
    def _entry(self, lane: LaneSpec) -> tuple[SharedByAddress, tuple[Need, ...]]:
        key = (lane.src_ip, lane.nat_ip, lane.takeover)
        entry = self._compiled.get(key)
        if entry is None:
            shared = {} if self._topology is None else sharedflows.lane_addresses(lane, self._topology)
            needs = tuple((dpid, address) for address, per_dpid in shared.items() for dpid in per_dpid)
            entry = self._compiled[key] = (shared, needs)
        return entry

    def shared_flows(self, lane: LaneSpec) -> SharedByAddress:
        """address -> dpid -> the lane's shared flows (cached messages: do not change them)."""
        return self._entry(lane)[0]

    def needs(self, lane: LaneSpec) -> tuple[Need, ...]:
        return self._entry(lane)[1]

    def nat_addresses(self) -> list[str]:
        """The lane-pool addresses carried lanes use, each once (proxy ARP answers for these)."""
        return list(self._nat_users)

    def users(self) -> dict[Need, int]:
        """(dpid, address) -> carried lanes needing its shared flows (tests, metrics)."""
        return dict(self._users)

    def orphaned(self, lane: LaneSpec, keep: Iterable[LaneSpec] = ()) -> dict[int, set[str]]:
        """dpid -> addresses of ``lane`` whose shared flows no other carried lane (the one carried
        under ``lane``'s id does not count) nor one of ``keep`` needs there."""
        carried = self.get(lane.lane_id)
        own = set(self.needs(carried)) if carried is not None else set()
        kept = {need for other in keep for need in self.needs(other)}
        out: dict[int, set[str]] = {}
        for need in self.needs(lane):
            if self._users.get(need, 0) - (need in own) <= 0 and need not in kept:
                out.setdefault(need[0], set()).add(need[1])
        return out

    def set_view(self, topology: Topology) -> None:
        """Compile shared flows over ``topology`` from now on (the runtime's view after a
        re-route: a lane's ICMP transit flows follow its path) and count every carried lane's
        needs again over it."""
        self._topology = topology
        self._compiled.clear()
        self._users.clear()
        self._nat_users.clear()
        for lane in self.values():
            self._count(lane, +1)

    # ---- the index, kept in step with every change of the dict ------------------------------
    def _count(self, lane: LaneSpec, step: int) -> None:
        for need in self.needs(lane):
            _add(self._users, need, step)
        if lane.nat_ip:
            _add(self._nat_users, str(lane.nat_ip), step)

    def __setitem__(self, lane_id: int, lane: LaneSpec) -> None:
        old = self.get(lane_id)
        if old is not None:
            self._count(old, -1)
        super().__setitem__(lane_id, lane)
        self._count(lane, +1)

    def __delitem__(self, lane_id: int) -> None:
        lane = self[lane_id]
        super().__delitem__(lane_id)
        self._count(lane, -1)

    _MISSING: Any = object()

    def pop(self, lane_id: int, default: Any = _MISSING) -> Any:
        if lane_id in self:
            lane = super().pop(lane_id)
            self._count(lane, -1)
            return lane
        if default is CarriedLanes._MISSING:
            raise KeyError(lane_id)
        return default

    def popitem(self) -> tuple[int, LaneSpec]:
        lane_id, lane = super().popitem()
        self._count(lane, -1)
        return lane_id, lane

    def setdefault(self, lane_id: int, default: LaneSpec) -> LaneSpec:
        if lane_id not in self:
            self[lane_id] = default
        return self[lane_id]

    def update(self, other: Any = (), /) -> None:
        items = other.items() if isinstance(other, Mapping) else other
        for lane_id, lane in list(items):
            self[lane_id] = lane

    def __ior__(self, other: Any) -> CarriedLanes:  # type: ignore[override, misc]
        self.update(other)
        return self

    def clear(self) -> None:
        super().clear()
        self._users.clear()
        self._nat_users.clear()


def _add(counts: dict[Any, int], key: Any, step: int) -> None:
    n = counts.get(key, 0) + step
    if n > 0:
        counts[key] = n
    else:
        counts.pop(key, None)
