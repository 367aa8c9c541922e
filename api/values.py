"""The value checks, field types and time conversions every schema and view of the API shares.

Split from ``schemas.py`` so the rules for one value (whole-string matches, no bidi or control
characters, addresses without zone ids, dates inside 1970..9999) sit apart from the resource
schemas built on them.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
import unicodedata
from typing import Any, overload

import marshmallow as ma
from marshmallow import fields as f
from marshmallow import validate as v

from viplanes.errors import Invalid


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


def ip_address(value: str) -> None:
    """An IPv4 or IPv6 address, without a zone id."""
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


def ip_prefix(value: str) -> None:
    """An IPv4 or IPv6 address or prefix, host bits zero."""
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


# a provider group as its groups claim names it: Keycloak names or paths, Entra object ids
GROUP = FullMatch(r"^[^\x00-\x1f\x7f]{1,255}$", error="1-255 printable characters")
