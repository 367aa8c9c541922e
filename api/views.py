"""Model rows -> response dicts (the schemas then serialise them)."""

from __future__ import annotations

import json
from typing import Any

from viplanes.authz.tokens import Caller
from viplanes.domain.portmasks import format_port_ranges
from viplanes.domain.values import single_address
from viplanes.lanes.overlap import row_nets, row_ports
from viplanes.lanes.targets import lane_budget
from viplanes.store.models import AuditEvent, Grant, Lane, Principal
from viplanes.store.records import grant_state
from viplanes.topologies.model import Topology

from .values import from_ts


def _one_address(nets: list[str]) -> str | None:
    """The old ``dst_ip`` of a lane whose set is one address (a name with one record)."""
    return single_address(nets[0]) if len(nets) == 1 else None


def _one_port(ports: list[tuple[int, int]]) -> int | None:
    return ports[0][0] if len(ports) == 1 and ports[0][0] == ports[0][1] else None


def lane_dict(lane: Lane, caller: Caller, topology: Topology | None = None) -> dict[str, Any]:
    owner = lane.__dict__.get("principal")  # eager-loaded unless the row was just inserted
    name = owner.name if owner is not None else caller.name
    nets, ports = row_nets(lane.dst_ip, lane.dst_nets), row_ports(lane.dst_port, lane.dst_ports)
    matches, flows = lane_budget(lane.src_ip, lane.dst_ip, lane.dst_port, lane.dst_nets, lane.dst_ports, topology)
    return {
        "id": lane.id,
        "principal": name,
        "grant_id": lane.grant_id,
        "src_ip": lane.src_ip,
        "dst_ip": lane.dst_ip or _one_address(nets),
        "protocol": lane.protocol,
        "dst_port": lane.dst_port if lane.dst_port is not None else _one_port(ports),
        "src_port": lane.src_port,
        "duration_s": lane.duration_s,
        "rate_mbps": lane.rate_mbps,
        "purpose": lane.purpose,
        "state": lane.state,
        "reason": lane.reason,
        "nat_ip": lane.nat_ip,
        "created_at": from_ts(lane.created_at),
        "starts_at": from_ts(lane.starts_at),
        "expires_at": from_ts(lane.expires_at),
        "activated_at": from_ts(lane.activated_at),
        "ended_at": from_ts(lane.ended_at),
        "activation_ms": lane.activation_ms,
        "dst_nets": nets,
        "dst_ports": format_port_ranges(ports),
        "dst_host": lane.dst_host,
        "dst_refresh_at": from_ts(lane.dst_refresh_at),
        "match_count": matches,
        "flow_count": flows,
        "trigger": _trigger(lane),
    }


def _trigger(lane: Lane) -> dict[str, Any] | None:
    """What made an automatic lane (issue 32); None for a requested one."""
    if lane.trigger_kind is None:
        return None
    detail = json.loads(lane.trigger_detail) if lane.trigger_detail else {}
    return {"kind": lane.trigger_kind, "grant_id": lane.trigger_grant_id, **detail}


def grant_dict(g: Grant, now: float, principal: str | None = None) -> dict[str, Any]:
    return {
        "id": g.id,
        "principal": principal or (g.principal.name if g.principal is not None else None),
        "group": g.group_name,
        "src_prefixes": g.src_prefixes,
        "dst_prefixes": g.dst_prefixes,
        "protocols": g.protocols,
        "ports": g.ports,
        "max_duration_s": g.max_duration_s,
        "max_rate_mbps": g.max_rate_mbps,
        "max_lanes": g.max_lanes,
        "valid_from": from_ts(g.valid_from),
        "valid_until": from_ts(g.valid_until),
        "revoked_at": from_ts(g.revoked_at),
        "state": grant_state(g, now),
        "created_at": from_ts(g.created_at),
        "created_by": g.created_by,
    }


def principal_dict(p: Principal, token: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.name, "role": p.role, "disabled": p.disabled, "created_at": from_ts(p.created_at)}
    if token is not None:
        out["token"] = token
    return out


def audit_dict(e: AuditEvent) -> dict[str, Any]:
    return {
        "id": e.id,
        "at": from_ts(e.at),
        "actor": e.actor,
        "action": e.action,
        "target": e.target,
        "decision": e.decision,
        "reason": e.reason,
    }
