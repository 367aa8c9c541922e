"""Lanes to a DNS name follow the name: resolve again when the answer's TTL runs out.

A cloud endpoint's addresses rotate; a lane that kept its first answer would miss the transfer's
new connections. For every live lane with a ``dst_host`` whose ``dst_refresh_at`` has passed, the
refresher resolves the name and keeps the addresses the lane's grant and the destination policy
allow, at most as many as the lane's match budget holds (``VIPLANES_MAX_LANE_MATCHES``; the ones it
already carries first), and none that another live lane of the same source carries (two lanes
matching one packet overwrite each other's flows). What is left out is named in the audit log.
When the set changed:

1. the new addresses are claimed: stored with the old set, in the transaction that checked them
   for overlap, so no request can take them while they are installed (``_reserve``);
2. an active lane is re-sent to the data plane with the new set (``Dataplane.activate`` with the
   same lane id: the data plane replaces the lane's flows, as for an extension). If the data plane
   refuses, the old set is stored again and stays on the switches, and the refusal is audited;
3. the new set is written (a conditional UPDATE: a lane ended meanwhile is deactivated again) and
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

from viplanes.domain.values import ActivationResult
from viplanes.lanes.features import entries_per_destination
from viplanes.lanes.outcomes import failed_by
from viplanes.lanes.overlap import IPNet, overlapping_lane, row_ports, source_aliases
from viplanes.lanes.resolver import ResolveError
from viplanes.lanes.specs import spec_of
from viplanes.lanes.targets import clamp_ttl, sort_nets, usable_nets
from viplanes.policy.rules import destination_refusals
from viplanes.store.db import updated_rows
from viplanes.store.models import LIVE_STATES, Lane
from viplanes.store.records import audit, get_grant, rule_of

if TYPE_CHECKING:
    from viplanes.lanes.desk import LaneDesk

log = logging.getLogger(__name__)


def _short(net: str) -> str:
    return net.rsplit("/", 1)[0] if net.endswith(("/32", "/128")) else net


class NameRefresher:
    """Re-resolves lanes to a DNS name, with the lane service's context and its removal call."""

    def __init__(self, lanes: LaneDesk) -> None:
        self.context = lanes.context
        self._revoke = lanes.revoke_lanes  # a lane ended while its new set was sent

    def due(self, now: float) -> list[int]:
        with self.context.db.read() as s:
            return list(
                s.scalars(
                    select(Lane.id).where(
                        Lane.dst_refresh_at <= now, Lane.dst_host.is_not(None), Lane.state.in_(LIVE_STATES)
                    )
                )
            )

    def refresh_due(self) -> int:
        """Re-resolve every lane whose name is due; returns how many lanes changed their set."""
        changed = 0
        for lane_id in self.due(self.context.clock()):
            try:
                changed += self.refresh(lane_id)
            except Exception:  # one lane's trouble must not stop the others
                log.exception("re-resolving lane %s", lane_id)
        return changed

    def _retry_later(
        self, lane_id: int, at: float, action: str = "", reason: str = "", decision: str = "failed"
    ) -> None:
        m = self.context
        with m.db.write() as s:
            s.execute(update(Lane).where(Lane.id == lane_id).values(dst_refresh_at=at))
            if action:
                audit(s, m.clock(), "system", action, f"lane:{lane_id}", decision, reason)

    def refresh(self, lane_id: int) -> bool:
        m = self.context
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
            self._retry_later(
                lane_id, now + floor, "lane.resolve", f"{exc}; keeping {len(lane.dst_nets or [])} address(es)"
            )
            return False
        next_at = now + clamp_ttl(found.ttl_s, floor, cap)
        nets, _ = usable_nets(found.addresses, m.topology.host_by_ip(lane.src_ip))
        refused = destination_refusals(nets, rule, m.topology, ipaddress.ip_address(lane.src_ip))
        old = list(lane.dst_nets or [])
        ports = row_ports(lane.dst_port, lane.dst_ports)
        usable = [n for n in nets if n not in refused]
        per_dest = entries_per_destination(m.topology, lane.src_ip, tuple(ports))  # exact ports without masks
        kept, over_budget = within_match_budget(usable, old, per_dest, m.limits.max_matches)
        left_out = [f"{_short(str(n))}: {why}" for n, why in refused.items()]
        if over_budget:
            left_out.append(
                f"{len(over_budget)} address(es) over the lane's match budget "
                f"({m.limits.max_matches}): {', '.join(_short(str(n)) for n in over_budget[:8])}"
                + (" ..." if len(over_budget) > 8 else "")
            )
        if not usable:
            self._retry_later(
                lane_id,
                now + floor,
                "lane.destinations",
                f"{lane.dst_host} now resolves only to refused addresses ({'; '.join(left_out)}); "
                "the lane keeps its set",
                "deny",
            )
            return False
        if [str(n) for n in kept] == old:
            self._retry_later(lane_id, next_at)
            return False
        with m.resend_lock:  # one re-send of this lane at a time (an extension re-sends too)
            reserved = self._reserve(lane_id, kept, old, ports)
            if reserved is None:
                return False  # ended meanwhile
            allowed, clashes = reserved
            left_out += [f"{_short(str(n))}: lane {other} of this source carries it" for n, other in clashes.items()]
            if not allowed:  # every address it resolves to is another lane's
                self._retry_later(
                    lane_id,
                    now + floor,
                    "lane.destinations",
                    f"{lane.dst_host} now resolves only to addresses this lane cannot have "
                    f"({'; '.join(left_out)}); the lane keeps its set",
                    "deny",
                )
                return False
            if allowed == old:
                self._retry_later(
                    lane_id,
                    next_at,
                    "lane.destinations",
                    f"{lane.dst_host}: no change kept; left out {'; '.join(left_out)}",
                    "deny",
                )
                return False
            spec = spec_of(lane, dst_nets=allowed)
            result: ActivationResult | None = None
            if lane.state == "active":
                try:
                    result = m.dataplane.activate(spec)
                except Exception as exc:
                    result = failed_by(exc, 0.0)
                if not result.ok:
                    self._write_set(
                        lane_id,
                        old,
                        now + floor,
                        "lane.destinations",
                        f"{lane.dst_host} moved to {', '.join(map(_short, allowed))} but the data "
                        f"plane refused: {result.reason}; the lane keeps its set",
                        "failed",
                    )
                    return False
            added = [_short(n) for n in allowed if n not in old]
            removed = [_short(n) for n in old if n not in allowed]
            moved = self._write_set(
                lane_id,
                allowed,
                next_at,
                "lane.destinations",
                f"{lane.dst_host}: +{', '.join(added) or '-'} -{', '.join(removed) or '-'}"
                + (f"; left out {'; '.join(left_out)}" if left_out else ""),
                "done",
            )
        if not moved and result is not None and result.ok:
            self._revoke([lane_id])  # ended while we re-sent it: take the flows down again
        return moved

    def _reserve(
        self, lane_id: int, kept: list[IPNet], old: list[str], ports: list[tuple[int, int]]
    ) -> tuple[list[str], dict[IPNet, int]] | None:
        """Leave out the new addresses another live lane of this source already carries, and
        store the old set plus the rest before the data plane hears of them.

        Why: two lanes carrying one packet overwrite each other's flows (``lane_overlap``), and a
        name's owner could otherwise move their lane onto another principal's lane on a shared
        host. The check and the stored union are one transaction under the (source, protocol)
        lock that requests take, so no request can claim an address between the two; the union
        keeps a concurrent request or extension from claiming what is about to be installed.
        Lane row first, then the advisory lock: the order ``LaneManager.extend`` takes them."""
        m = self.context
        with m.db.write() as s:
            q = select(Lane).where(Lane.id == lane_id).with_for_update(of=Lane)
            row = s.scalar(q.execution_options(populate_existing=True))
            if row is None or row.state not in LIVE_STATES:
                return None
            clashes: dict[IPNet, int] = {}
            for net in kept:
                if str(net) in old:
                    continue
                other = overlapping_lane(
                    s,
                    m.db,
                    source_aliases(m.topology, row.src_ip),
                    row.protocol,
                    [net],
                    ports,
                    row.src_port,
                    row.starts_at,
                    row.expires_at,
                    exclude=lane_id,
                )
                if other is not None:
                    clashes[net] = other
            allowed = [str(n) for n in sort_nets([n for n in kept if n not in clashes])]
            union = [str(n) for n in sort_nets({ipaddress.ip_network(n) for n in old + allowed})]
            if union != old:
                row.dst_nets = union
        return allowed, clashes

    def _write_set(
        self, lane_id: int, nets: list[str], next_at: float, action: str, reason: str, decision: str
    ) -> bool:
        """Store the lane's set (a conditional UPDATE: False when the lane ended meanwhile)."""
        m = self.context
        with m.db.write() as s:
            moved = (
                updated_rows(
                    s,
                    update(Lane)
                    .where(Lane.id == lane_id, Lane.state.in_(LIVE_STATES))
                    .values(dst_nets=nets, dst_refresh_at=next_at),
                )
                == 1
            )
            if moved or decision != "done":
                audit(s, m.clock(), "system", action, f"lane:{lane_id}", decision, reason)
        return moved


def within_match_budget(
    usable: list[IPNet], old: list[str], masks: int, max_matches: int
) -> tuple[list[IPNet], list[IPNet]]:
    """The addresses a lane keeps when its name resolves to more than its match budget allows
    (the request was refused beyond it; a refresh must not grow past it either): the ones the
    lane already carries first (their connections keep their rules), then the new ones in order.
    Returns (kept, left out)."""
    room = max(1, max_matches // max(1, masks))
    ordered = sort_nets(usable)
    olds = set(old)
    first = [n for n in ordered if str(n) in olds] + [n for n in ordered if str(n) not in olds]
    return list(sort_nets(first[:room])), first[room:]


class NameWatcher:
    """A daemon thread calling :meth:`NameRefresher.refresh_due` every ``interval_s`` (DNS can be
    slow: kept off the lifecycle scheduler's thread so a lookup never delays an expiry)."""

    def __init__(self, lanes: LaneDesk, interval_s: float = 1.0) -> None:
        self.refresher = NameRefresher(lanes)
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
