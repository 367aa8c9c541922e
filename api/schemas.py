"""Request and response schemas (marshmallow). Bounds keep every value inside the database's types;
the value checks and field types they share are in ``values``."""

from __future__ import annotations

import datetime as dt
from typing import Any

import marshmallow as ma
from marshmallow import fields as f
from marshmallow import validate as v

from viplanes.authz.tokens import ROLES
from viplanes.policy.rules import MAX_DURATION_S, MAX_RATE_MBPS
from viplanes.store.models import LANE_STATES

from .values import (
    GROUP,
    HOST_NAME,
    MAX_LANES,
    NAME,
    PAGE,
    PORT,
    PREFIX_META,
    TEXT,
    PortItem,
    PortRangesField,
    Strict,
    ip_address,
    ip_prefix,
    plain_text,
)

# --- lanes -----------------------------------------------------------------------------------


class LaneRequestSchema(Strict):
    """Exactly one of dst_ip / dst_prefix / dst_host, and one of dst_port / dst_ports."""

    src_ip = f.String(required=True, validate=ip_address, metadata={"description": "IPv4 or IPv6 address"})
    dst_ip = f.String(
        load_default=None,
        allow_none=True,
        validate=ip_address,
        metadata={"description": "one destination address (IPv4 or IPv6)"},
    )
    dst_prefix = f.String(
        load_default=None,
        allow_none=True,
        validate=ip_prefix,
        metadata={"description": "every address of this prefix (inside the grant)"},
    )
    dst_host = f.String(
        load_default=None,
        allow_none=True,
        validate=HOST_NAME,
        metadata={"description": "a DNS name: all its A/AAAA addresses, re-resolved at their TTL while the lane lives"},
    )
    protocol = f.String(required=True, validate=v.OneOf(["tcp", "udp"]))
    dst_port = f.Integer(load_default=None, allow_none=True, strict=True, validate=PORT)
    dst_ports = PortRangesField(load_default=None, allow_none=True)

    @ma.validates_schema
    def _one_destination_and_port(self, data: dict[str, Any], **_kw: Any) -> None:
        given = [k for k in ("dst_ip", "dst_prefix", "dst_host") if data.get(k) is not None]
        if len(given) != 1:
            raise ma.ValidationError("give exactly one of dst_ip, dst_prefix and dst_host", field_name="dst_ip")
        if (data.get("dst_port") is None) == (data.get("dst_ports") is None):
            raise ma.ValidationError("give exactly one of dst_port and dst_ports", field_name="dst_port")

    src_port = f.Integer(load_default=None, allow_none=True, strict=True, validate=PORT)
    duration_s = f.Integer(required=True, strict=True, validate=v.Range(1, MAX_DURATION_S))
    start_at = f.AwareDateTime(load_default=None, allow_none=True, default_timezone=dt.UTC)
    rate_mbps = f.Float(
        load_default=None, allow_none=True, allow_nan=False, validate=v.Range(0, MAX_RATE_MBPS, min_inclusive=False)
    )
    purpose = f.String(required=True, validate=[v.Length(1, 500), TEXT, plain_text])


class LaneSchema(ma.Schema):
    id = f.Integer(required=True)
    principal = f.String(required=True)
    grant_id = f.Integer(required=True)
    src_ip = f.String(required=True)
    dst_ip = f.String(required=True, allow_none=True, metadata={"description": "null when the lane has a set"})
    protocol = f.String(required=True)
    dst_port = f.Integer(required=True, allow_none=True)
    dst_nets = f.List(f.String(), required=True, metadata={"description": "destination networks carried"})
    dst_ports = f.List(f.String(), required=True, metadata={"description": "port ranges carried"})
    dst_host = f.String(required=True, allow_none=True)
    dst_refresh_at = f.DateTime(required=True, allow_none=True, metadata={"description": "next re-resolution"})
    match_count = f.Integer(required=True, metadata={"description": "destinations x masked port entries"})
    flow_count = f.Integer(
        required=True, allow_none=True, metadata={"description": "match_count x 2 (forward, reverse) x hops"}
    )
    src_port = f.Integer(required=True, allow_none=True)
    duration_s = f.Integer(required=True)
    rate_mbps = f.Float(required=True, allow_none=True)
    purpose = f.String(required=True)
    state = f.String(required=True, validate=v.OneOf(LANE_STATES))
    reason = f.String(required=True)
    nat_ip = f.String(required=True, allow_none=True)
    created_at = f.DateTime(required=True)
    starts_at = f.DateTime(required=True)
    expires_at = f.DateTime(required=True)
    activated_at = f.DateTime(required=True, allow_none=True)
    ended_at = f.DateTime(required=True, allow_none=True)
    activation_ms = f.Float(required=True, allow_none=True)
    trigger = f.Dict(
        required=True,
        allow_none=True,
        metadata={
            "description": "automatic lanes: kind (sflow, firefly), grant_id and the evidence; null if requested"
        },
    )


class LaneQuerySchema(Strict):
    state = f.String(validate=v.OneOf(LANE_STATES))
    principal = f.String(validate=NAME)
    src_ip = f.String(validate=ip_address)
    dst_ip = f.String(validate=ip_address)
    limit = f.Integer(load_default=100, validate=PAGE)
    offset = f.Integer(load_default=0, validate=v.Range(0, 10**9))


class ExtendSchema(Strict):
    add_s = f.Integer(required=True, strict=True, validate=v.Range(1, MAX_DURATION_S))


class CountersSchema(ma.Schema):
    lane_id = f.Integer(required=True)
    state = f.String(required=True)
    available = f.Boolean(required=True)
    packets = f.Integer(required=True, allow_none=True)
    bytes = f.Integer(required=True, allow_none=True)
    age_s = f.Float(
        allow_none=True,
        metadata={"description": "seconds since the counters were read from the switches; null: read just now"},
    )


# --- grants ----------------------------------------------------------------------------------


class GrantCreateSchema(Strict):
    principal = f.String(load_default=None, validate=NAME)
    group = f.String(
        load_default=None,
        validate=GROUP,
        metadata={"description": "instead of principal: every member of this group at the identity provider"},
    )

    @ma.validates_schema
    def _principal_or_group(self, data: dict[str, Any], **_kw: Any) -> None:
        if (data.get("principal") is None) == (data.get("group") is None):
            raise ma.ValidationError("give exactly one of principal and group", field_name="principal")

    src_prefixes = f.List(f.String(validate=ip_prefix, metadata=PREFIX_META), required=True, validate=v.Length(1, 64))
    dst_prefixes = f.List(f.String(validate=ip_prefix, metadata=PREFIX_META), required=True, validate=v.Length(1, 64))
    protocols = f.List(f.String(validate=v.OneOf(["tcp", "udp"])), required=True, validate=v.Length(1, 2))
    ports = f.List(PortItem(), required=True, validate=v.Length(1, 64))
    max_duration_s = f.Integer(required=True, strict=True, validate=v.Range(1, MAX_DURATION_S))
    max_rate_mbps = f.Float(
        load_default=None, allow_none=True, allow_nan=False, validate=v.Range(0, MAX_RATE_MBPS, min_inclusive=False)
    )
    max_lanes = f.Integer(load_default=1, strict=True, validate=v.Range(1, MAX_LANES))
    valid_from = f.AwareDateTime(load_default=None, allow_none=True, default_timezone=dt.UTC)
    valid_until = f.AwareDateTime(load_default=None, allow_none=True, default_timezone=dt.UTC)


class GrantSchema(ma.Schema):
    id = f.Integer(required=True)
    principal = f.String(required=True, allow_none=True)
    group = f.String(required=True, allow_none=True)
    src_prefixes = f.List(f.String(), required=True)
    dst_prefixes = f.List(f.String(), required=True)
    protocols = f.List(f.String(), required=True)
    ports = f.List(f.String(), required=True)
    max_duration_s = f.Integer(required=True)
    max_rate_mbps = f.Float(required=True, allow_none=True)
    max_lanes = f.Integer(required=True)
    valid_from = f.DateTime(required=True, allow_none=True)
    valid_until = f.DateTime(required=True, allow_none=True)
    revoked_at = f.DateTime(required=True, allow_none=True)
    state = f.String(required=True, validate=v.OneOf(["pending", "active", "expired", "revoked"]))
    created_at = f.DateTime(required=True)
    created_by = f.String(required=True)


class GrantQuerySchema(Strict):
    principal = f.String(validate=NAME)
    active = f.Boolean()
    limit = f.Integer(load_default=100, validate=PAGE)
    offset = f.Integer(load_default=0, validate=v.Range(0, 10**9))


class GrantRevokedSchema(ma.Schema):
    grant = f.Nested(GrantSchema, required=True)
    revoked_lanes = f.List(f.Integer(), required=True)


# --- principals ------------------------------------------------------------------------------


class PrincipalCreateSchema(Strict):
    name = f.String(required=True, validate=NAME)
    role = f.String(required=True, validate=v.OneOf(ROLES))


class PrincipalSchema(ma.Schema):
    name = f.String(required=True)
    role = f.String(required=True)
    disabled = f.Boolean(required=True)
    created_at = f.DateTime(required=True)


class PrincipalDisabledSchema(PrincipalSchema):
    revoked_lanes = f.List(f.Integer(), required=True, metadata={"description": "its live lanes, now revoked"})


class PrincipalTokenSchema(PrincipalSchema):
    token = f.String(required=True, metadata={"description": "shown once; store it now"})


# --- audit -----------------------------------------------------------------------------------


class AuditQuerySchema(Strict):
    actor = f.String(validate=NAME)
    action = f.String(validate=[v.Length(1, 32), TEXT])
    decision = f.String(validate=v.OneOf(["allow", "deny", "done", "failed"]))
    target = f.String(validate=[v.Length(1, 64), TEXT])
    since = f.AwareDateTime(default_timezone=dt.UTC)
    until = f.AwareDateTime(default_timezone=dt.UTC)
    limit = f.Integer(load_default=100, validate=PAGE)
    offset = f.Integer(load_default=0, validate=v.Range(0, 10**9))


class AuditEventSchema(ma.Schema):
    id = f.Integer(required=True)
    at = f.DateTime(required=True)
    actor = f.String(required=True)
    action = f.String(required=True)
    target = f.String(required=True)
    decision = f.String(required=True)
    reason = f.String(required=True)


class WhoAmISchema(ma.Schema):
    name = f.String(required=True)
    role = f.String(required=True)
