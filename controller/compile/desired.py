"""The flows the switches should hold, compiled once per lane. Pure (no I/O); not thread-safe:
the runtime calls it under its compile lock (a chunk of lanes at a time).

Building FlowMods is os-ken's slow part (~0.3 ms each: netaddr parses every address), and a
reconcile of 10,000 lanes would rebuild 20,000 of them each time. So each lane is compiled once;
later rounds only bring its hard timeouts up to date (flow identity ignores timeouts). A switch's
reconcile compiles only the lanes whose path crosses it, so a switch no lane uses is reconciled
at once even while thousands of lanes elsewhere wait to be compiled.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from viplanes.controller.compile import base as guardflows
from viplanes.controller.compile import hold
from viplanes.controller.compile import lane as compiler
from viplanes.controller.compile import shared as sharedflows
from viplanes.domain.values import LaneSpec, NatMapping
from viplanes.topologies.model import Topology
from viplanes.topologies.paths import NoLanePath

LOG = logging.getLogger("viplanes.controller.runtime.lane_runtime")
OFMsgs = list[Any]


class DesiredFlows:
    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self._compiled: dict[LaneSpec, dict[int, OFMsgs]] = {}
        self._paths: dict[str, tuple[int, ...]] = {}  # source address -> dpids of its lane path
        # (source, nat address) -> the shared per-address flows its lanes need, per dpid
        self._shared: dict[tuple[str, str | None, NatMapping | None], dict[int, OFMsgs]] = {}
        self._base: dict[int, OFMsgs] = {}  # dpid -> its base flows, compiled once (issue 13)
        # lane id -> why it is held (no usable path: ``hold.py``); only with unusable links
        self.held: dict[int, str] = {}

    def base(self, dpid: int) -> OFMsgs:
        """The switch's base flows (compiled on first use, then the same messages: their flow
        identities are cached on them); empty for a dpid the topology does not have."""
        msgs = self._base.get(dpid)
        if msgs is None:
            sw = self.topology.switch_by_dpid(dpid)
            msgs = self._base[dpid] = guardflows.base_flows(self.topology, sw) if sw else []
        return msgs

    def base_all(self) -> dict[int, OFMsgs]:
        """Every switch's base flows (as ``compiler.compile_base``, compiled once per switch)."""
        return {sw.dpid: self.base(sw.dpid) for sw in self.topology.switches}

    def by_switch(self, lanes: Iterable[LaneSpec]) -> dict[int, list[LaneSpec]]:
        """dpid -> the lanes whose path crosses it: one pass over the lanes for every switch."""
        out: dict[int, list[LaneSpec]] = {}
        for lane in lanes:
            for dpid in self.dpids_of(lane):
                out.setdefault(dpid, []).append(lane)
        return out

    def dpids_of(self, lane: LaneSpec) -> tuple[int, ...]:
        """Switches the lane crosses (by its source: every lane of a host takes the same path);
        empty when it has no path (compiling it then says why)."""
        dpids = self._paths.get(lane.src_ip)
        if dpids is None:
            try:
                dpids = compiler.lane_dpids(lane, self.topology)
            except NoLanePath:
                dpids = self._held_dpids(lane)
            except ValueError:
                dpids = ()
            self._paths[lane.src_ip] = dpids
        return dpids

    def compiled(self, lane: LaneSpec) -> bool:
        return lane in self._compiled

    def lane(self, lane: LaneSpec, now: float, dpid: int | None = None) -> dict[int, OFMsgs] | None:
        """The lane's messages per dpid, hard timeouts as of ``now`` (only ``dpid``'s, when
        given: a restart builds each of a lane's 5 switches on its own); None when it cannot be
        carried (logged)."""
        try:
            per_dpid = self._compiled.get(lane)
            if per_dpid is None:
                per_dpid = self._compiled[lane] = self._compile(lane, now)
            else:
                hard = compiler.hard_timeout_for(lane.expires_at, now)
                for msgs in per_dpid.values() if dpid is None else (per_dpid.get(dpid, ()),):
                    for msg in msgs:
                        if getattr(msg, "hard_timeout", 0):
                            msg.hard_timeout = hard
        except Exception as exc:
            LOG.warning("lane %d is not carried: %s", lane.lane_id, exc, exc_info=not isinstance(exc, ValueError))
            return None
        return per_dpid

    def _compile(self, lane: LaneSpec, now: float) -> dict[int, OFMsgs]:
        """The lane over the usable links; held at its first switch when none is left."""
        per_dpid, why = hold.compile_or_hold(lane, self.topology, now)
        if why is not None:
            self.held[lane.lane_id] = why
        else:
            self.held.pop(lane.lane_id, None)
        return per_dpid

    def _held_dpids(self, lane: LaneSpec) -> tuple[int, ...]:
        if not self.topology.unusable_links:
            return ()
        try:
            return hold.held_dpids(lane, self.topology)
        except ValueError:
            return ()

    def path_of(self, lane: LaneSpec) -> tuple[Any, ...] | None:
        """The lane's hops over this view, or None when it has none (held, or not buildable)."""
        try:
            return compiler.lane_hops(lane, self.topology)
        except ValueError:
            return None

    def peek(self, lane: LaneSpec) -> dict[int, OFMsgs] | None:
        """The lane's compiled messages as they are (hard timeouts not re-timed), or None."""
        return self._compiled.get(lane)

    def put(self, lane: LaneSpec, per_dpid: dict[int, OFMsgs], held: str | None = None) -> None:
        """The lane's messages, built elsewhere (an activation's compile, a re-route's
        ``repath``): later rounds reuse them as if compiled here. ``held``: they hold the lane
        (``hold.compile_or_hold``), and why."""
        self._compiled[lane] = per_dpid
        if held is None:
            self.held.pop(lane.lane_id, None)
        else:
            self.held[lane.lane_id] = held

    def adopt(self, old: DesiredFlows, lanes: Iterable[LaneSpec]) -> None:
        """Take over ``old``'s compiled messages of these lanes, whose path is the same in both
        views, and the base flows (a view changes no switch's base flows): a re-route compiles
        only the lanes that move."""
        self._base.update(old._base)
        for lane in lanes:
            msgs = old._compiled.get(lane)
            if msgs is not None:
                self._compiled[lane] = msgs
            if lane.lane_id in old.held:
                self.held[lane.lane_id] = old.held[lane.lane_id]
            key = (lane.src_ip, lane.nat_ip, lane.takeover)
            if key in old._shared and key not in self._shared:
                self._shared[key] = old._shared[key]

    def forget_all_but(self, lanes: Iterable[LaneSpec]) -> None:
        live = set(lanes)
        self._compiled = {ln: msgs for ln, msgs in self._compiled.items() if ln in live}
        ids = {ln.lane_id for ln in live}
        self.held = {lid: why for lid, why in self.held.items() if lid in ids}

    def build(
        self, lanes: Iterable[LaneSpec], now: float, dpid: int | None = None
    ) -> tuple[dict[int, OFMsgs], dict[int, LaneSpec]]:
        """Base flows plus every lane (or only those crossing ``dpid``): (ofmsgs per dpid, the
        lanes that compiled). Compiled lanes not in ``lanes`` stay cached: the caller passes
        one switch's lanes and forgets the rest once per read (``forget_all_but``)."""
        lanes = tuple(lanes)
        if dpid is None:
            out = {d: list(msgs) for d, msgs in self.base_all().items()}
        else:
            out = {dpid: list(self.base(dpid))} if self.topology.switch_by_dpid(dpid) else {}
        carried: dict[int, LaneSpec] = {}
        for lane in lanes:
            if dpid is not None and dpid not in self.dpids_of(lane):
                continue
            per_dpid = self.lane(lane, now, dpid)
            if per_dpid is None:
                continue
            carried[lane.lane_id] = lane
            if dpid is None:
                for d, msgs in per_dpid.items():
                    out.setdefault(d, []).extend(msgs)
            else:  # the other switches' lists were built and thrown away
                out.setdefault(dpid, []).extend(per_dpid.get(dpid, ()))
        for d, msgs in self.shared(carried.values()).items():
            if dpid is None or d == dpid:
                out.setdefault(d, []).extend(msgs)
        return out, carried

    def shared(self, lanes: Iterable[LaneSpec]) -> dict[int, OFMsgs]:
        """The shared per-address flows of these lanes, each once (compiled once per source and
        lane address: thousands of lanes share a handful)."""
        out: dict[int, OFMsgs] = {}
        for key in dict.fromkeys((ln.src_ip, ln.nat_ip, ln.takeover) for ln in lanes):
            per_dpid = self._shared.get(key)
            if per_dpid is None:
                lane = next(ln for ln in lanes if (ln.src_ip, ln.nat_ip, ln.takeover) == key)
                per_dpid = self._shared[key] = sharedflows.compile_shared(self.topology, [lane])
            for d, msgs in per_dpid.items():
                out.setdefault(d, []).extend(msgs)
        return out
