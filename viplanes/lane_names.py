"""Lanes to a DNS name follow the name: resolve again when the answer's TTL runs out.

A cloud endpoint's addresses rotate; a lane that kept its first answer would miss the transfer's
new connections. For every live lane with a ``dst_host`` whose ``dst_refresh_at`` has passed, the
refresher resolves the name, keeps the addresses the lane's grant and the destination policy allow
(the others are named in the audit log and left out), and when the set changed:

1. an active lane is re-sent to the data plane with the new set (``Dataplane.activate`` with the
   same lane id: the data plane replaces the lane's flows, as for an extension). If the data plane
   refuses, the old set stays, in the database and on the switches, and the refusal is audited;
2. the new set is written (a conditional UPDATE: a lane ended meanwhile is deactivated again) and
   the change is audited as ``lane.destinations`` with the addresses added and removed.

A name that fails to resolve keeps the lane's set and is retried after the TTL floor. The next
resolution is due after the record's TTL, raised to ``ttl_floor_s`` and cut at ``ttl_cap_s``.
"""
from __future__ import annotations

import ipaddress
import logging
import threading
from typing import TYPE_CHECKING

from sqlalchemy import select, update

from viplanes.db import updated_rows
from viplanes.domain import ActivationResult, lane_shape_refusal
from viplanes.lane_specs import spec_of
from viplanes.lane_targets import clamp_ttl, sort_nets, usable_nets
from viplanes.models import LIVE_STATES, Lane
from viplanes.policy.rules import destination_refusals
from viplanes.resolver import ResolveError
from viplanes.store import audit, get_grant, rule_of

if TYPE_CHECKING:
    from viplanes.lanes import LaneManager

log = logging.getLogger(__name__)


def _short(net: str) -> str:
    return net.rsplit("/", 1)[0] if net.endswith(("/32", "/128")) else net


class NameRefresher:
    def __init__(self, manager: LaneManager) -> None:
        self.manager = manager

    def due(self, now: float) -> list[int]:
        with self.manager.db.read() as s:
            return list(s.scalars(select(Lane.id).where(
                Lane.dst_refresh_at <= now, Lane.dst_host.is_not(None), Lane.state.in_(LIVE_STATES))))

    def refresh_due(self) -> int:
        """Re-resolve every lane whose name is due; returns how many lanes changed their set."""
        changed = 0
        for lane_id in self.due(self.manager.clock()):
            try:
                changed += self.refresh(lane_id)
            except Exception:  # one lane's trouble must not stop the others
                log.exception("re-resolving lane %s", lane_id)
        return changed

    def _retry_later(self, lane_id: int, at: float, action: str = "", reason: str = "",
                     decision: str = "failed") -> None:
        m = self.manager
        with m.db.write() as s:
            s.execute(update(Lane).where(Lane.id == lane_id).values(dst_refresh_at=at))
            if action:
                audit(s, m.clock(), "system", action, f"lane:{lane_id}", decision, reason)

    def refresh(self, lane_id: int) -> bool:
        m = self.manager
        now = m.clock()
        with m.db.read() as s:
            lane = s.get(Lane, lane_id)
            if lane is None or lane.state not in LIVE_STATES or not lane.dst_host:
                return False
            rule = rule_of(get_grant(s, lane.grant_id))
            s.expunge(lane)
        floor, cap = m.limits.ttl_floor_s, m.limits.ttl_cap_s
        try:
            found = m.resolver.resolve(lane.dst_host)
        except ResolveError as exc:
            self._retry_later(lane_id, now + floor, "lane.resolve", f"{exc}; keeping {len(lane.dst_nets or [])} "
                              "address(es)")
            return False
        next_at = now + clamp_ttl(found.ttl_s, floor, cap)
        nets, _ = usable_nets(found.addresses, m.topology.host_by_ip(lane.src_ip))
        refused = destination_refusals(nets, rule, m.topology, ipaddress.ip_address(lane.src_ip))
        allowed = [str(n) for n in sort_nets([n for n in nets if n not in refused])]
        refused_text = "; ".join(f"{_short(str(n))}: {why}" for n, why in refused.items())
        old = list(lane.dst_nets or [])
        if not allowed:
            self._retry_later(lane_id, now + floor, "lane.destinations",
                              f"{lane.dst_host} now resolves only to refused addresses ({refused_text}); "
                              "the lane keeps its set", "deny")
            return False
        if allowed == old:
            self._retry_later(lane_id, next_at)
            return False
        with m.resend_lock:  # one re-send of this lane at a time (an extension re-sends too)
            spec = spec_of(lane, dst_nets=allowed)
            result: ActivationResult | None = None
            if lane.state == "active":
                refusal = None if getattr(m.dataplane, "carries_lane_sets", False) else lane_shape_refusal(spec)
                try:
                    result = ActivationResult(False, refusal, 0.0) if refusal else m.dataplane.activate(spec)
                except Exception as exc:
                    result = ActivationResult(False, f"data plane error: {exc}", 0.0)
                if not result.ok:
                    self._retry_later(lane_id, now + floor, "lane.destinations",
                                      f"{lane.dst_host} moved to {', '.join(map(_short, allowed))} but the data "
                                      f"plane refused: {result.reason}; the lane keeps its set")
                    return False
            added = [_short(n) for n in allowed if n not in old]
            removed = [_short(n) for n in old if n not in allowed]
            with m.db.write() as s:
                moved = updated_rows(s, update(Lane).where(Lane.id == lane_id, Lane.state.in_(LIVE_STATES)).values(
                    dst_nets=allowed, dst_refresh_at=next_at)) == 1
                if moved:
                    audit(s, m.clock(), "system", "lane.destinations", f"lane:{lane_id}", "done",
                          f"{lane.dst_host}: +{', '.join(added) or '-'} -{', '.join(removed) or '-'}"
                          + (f"; refused {refused_text}" if refused_text else ""))
        if not moved and result is not None and result.ok:
            m._deactivate(lane_id)  # ended while we re-sent it: take the flows down again
        return moved


class NameWatcher:
    """A daemon thread calling :meth:`NameRefresher.refresh_due` every ``interval_s`` (DNS can be
    slow: kept off the lifecycle scheduler's thread so a lookup never delays an expiry)."""

    def __init__(self, manager: LaneManager, interval_s: float = 1.0) -> None:
        self.refresher = NameRefresher(manager)
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="viplanes-names", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.refresher.refresh_due()
            except Exception:
                log.exception("name watcher")

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
