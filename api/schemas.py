"""Request and response schemas (marshmallow). Bounds keep every value inside the database's types."""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
import unicodedata
from typing import Any, overload

import marshmallow as ma
from marshmallow import fields as f
from marshmallow import validate as v

from viplanes.authz.tokens import ROLES
from viplanes.errors import Invalid
from viplanes.policy.rules import MAX_DURATION_S, MAX_RATE_MBPS
from viplanes.store.models import LANE_STATES


class FullMatch(v.Regexp):
    """``v.Regexp`` matches with ``re.match``, so ``^...$`` let "alice\\n" through (``$`` matches
    before a trailing newline). The whole value must match."""

    regex: re.Pattern[str]  # every pattern here is a str (marshmallow types it str or bytes)

    def __call__(self, value: Any) -> Any:
        if not isinstance(value, str) or self.regex.fullmatch(value) is None:
            raise ma.ValidationError(self._format_error(value))
        return value


# Unicode categories refused in free text: controls, format characters (bidi overrides such as
# U+202E that make "exe.txt" read "txt.exe" in a log or a terminal), surrogates, private use,
# unassigned, and line/paragraph separators.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def plain_text(value: str) -> str:
    for ch in value:
        if unicodedata.category(ch) in _REFUSED_CATEGORIES:
            raise ma.ValidationError(
                f"character U+{ord(ch):04X} is not allowed (control, format, bidi, private-use or unassigned)"
            )
    return value


NAME = FullMatch(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$", error="1-64 letters, digits, _ . @ - ")
TEXT = FullMatch(r"^[^\x00-\x1f\x7f]*$", error="no control characters")
PORT = v.Range(1, 65535)
MAX_LANES = 10_000
PAGE = v.Range(1, 1000)


ZONE_ID = "an IPv6 zone id (%...) names a link of this machine, never a lane's address"


def _ip(value: str) -> None:
    if "%" in value:  # ipaddress accepts "fe80::1%eth0"; the zone would follow the text everywhere
        raise ma.ValidationError(ZONE_ID)
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ma.ValidationError("not an IPv4 or IPv6 address") from None


PREFIX_META = {
    "example": "10.1.0.0/24",
    "description": "IPv4 or IPv6 address or prefix (host bits zero)",
    "maxLength": 43,
}


def _prefix(value: str) -> None:
    if "%" in value:
        raise ma.ValidationError(ZONE_ID)
    try:
        if len(value) > 43:
            raise ValueError
        ipaddress.ip_network(value, strict=True)
    except ValueError:
        raise ma.ValidationError("not an IPv4/IPv6 address or prefix (host bits must be zero)") from None


# RFC 1123 host name (the resolver checks it again); the API bounds the length first
HOST_NAME = FullMatch(
    r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$",
    error="not a host name",
)


MAX_TS = dt.datetime(9999, 12, 30, tzinfo=dt.UTC).timestamp()


def to_ts(value: dt.datetime | None) -> float | None:
    """Aware or naive (taken as UTC) datetime -> unix seconds."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    try:
        ts = value.timestamp()
    except (OverflowError, ValueError):
        ts = -1.0
    if not 0 <= ts <= MAX_TS:  # every stored time must render back as a date
        raise Invalid("date out of range (1970 .. 9999)", code="invalid_date")
    return ts


@overload
def from_ts(value: float) -> dt.datetime: ...
@overload
def from_ts(value: None) -> None: ...
@overload
def from_ts(value: float | None) -> dt.datetime | None: ...
def from_ts(value: float | None) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromtimestamp(value, dt.UTC)


class Strict(ma.Schema):
    class Meta:
        unknown = ma.RAISE


class PortItem(f.Field):
    """A port number or a "lo-hi" range string."""

    def __init__(self, **kwargs: Any) -> None:
        meta = {
            "oneOf": [
                {"type": "integer", "minimum": 1, "maximum": 65535},
                {"type": "string", "pattern": r"^[0-9]{1,5}(-[0-9]{1,5})?$"},
            ]
        }
        super().__init__(metadata=meta, **kwargs)

    def _deserialize(self, value: Any, attr: Any, data: Any, **kwargs: Any) -> int | str:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ma.ValidationError("a port number or a range like 9000-9100")
        if isinstance(value, int) and not 1 <= value <= 65535:
            raise ma.ValidationError("port out of 1..65535")
        if isinstance(value, str) and len(value) > 11:
            raise ma.ValidationError("a port number or a range like 9000-9100")
        return value

    def _serialize(self, value: Any, attr: Any, obj: Any, **kwargs: Any) -> Any:
        return value


class PortRangesField(f.Field):
    """``dst_ports``: one port, one "lo-hi" range, or a list of either (at most 64 items)."""

    def __init__(self, **kwargs: Any) -> None:
        item = {
            "oneOf": [
                {"type": "integer", "minimum": 1, "maximum": 65535},
                {"type": "string", "pattern": r"^[0-9]{1,5}(-[0-9]{1,5})?$"},
            ]
        }
        meta = {
            "oneOf": [*item["oneOf"], {"type": "array", "items": item, "minItems": 1, "maxItems": 64}],
            "example": "50000-51000",
        }
        super().__init__(metadata=meta, **kwargs)

    def _deserialize(self, value: Any, attr: Any, data: Any, **kwargs: Any) -> Any:
        from viplanes.domain.portmasks import PortRangeError, parse_port_ranges

        if isinstance(value, list) and not 1 <= len(value) <= 64:
            raise ma.ValidationError("1 to 64 ports or ranges")
        try:
            parse_port_ranges(value)
        except (PortRangeError, TypeError) as exc:
            raise ma.ValidationError(str(exc)[:200]) from None
        return value


# --- lanes -----------------------------------------------------------------------------------


class LaneRequestSchema(Strict):
    """Exactly one of dst_ip / dst_prefix / dst_host, and one of dst_port / dst_ports."""

    src_ip = f.String(required=True, validate=_ip, metadata={"description": "IPv4 or IPv6 address"})
    dst_ip = f.String(
        load_default=None,
        allow_none=True,
        validate=_ip,
        metadata={"description": "one destination address (IPv4 or IPv6)"},
    )
    dst_prefix = f.String(
        load_default=None,
        allow_none=True,
        validate=_prefix,
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
    src_ip = f.String(validate=_ip)
    dst_ip = f.String(validate=_ip)
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


# a provider group as its groups claim names it: Keycloak names or paths, Entra object ids
GROUP = FullMatch(r"^[^\x00-\x1f\x7f]{1,255}$", error="1-255 printable characters")


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

    src_prefixes = f.List(f.String(validate=_prefix, metadata=PREFIX_META), required=True, validate=v.Length(1, 64))
    dst_prefixes = f.List(f.String(validate=_prefix, metadata=PREFIX_META), required=True, validate=v.Length(1, 64))
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
