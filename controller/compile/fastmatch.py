"""Exact OFPMatches built without os-ken's per-call conversions.

``OFPMatch(**fields)`` normalises every value through os-ken's OXM tables on every call (~25 us a
field); lanes (thousands) and the host source guards (hosts x host ports per switch: tens of
thousands of matches on a campus of 128 access switches) repeat the same few values, so the
conversion is kept per (field, value) and the match is built in os-ken's own field order.
Serialising reuses os-ken's OXM bytes the same way. Pure; shared by ``compiler`` (lanes) and
``guardflows`` (base flows); ``tests/unit/controller/compile/test_fastmatch.py`` holds both to os-ken's output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from os_ken.lib.pack_utils import msg_pack_into
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

_FIELD_CACHE_MAX = 1 << 16
_encoded: dict[tuple[str, Any], bytes] = {}  # (field, user value) -> os-ken's OXM TLV bytes
_T = TypeVar("_T")


def kept_per_field(
    cache: dict[tuple[Any, Any], _T], name: Any, value: Any, compute: Callable[[Any, Any], _T], limit: int | None = None
) -> _T:
    """``compute(name, value)``, kept in ``cache`` per (field, value): lanes and flows repeat most
    of their fields. Bounded by ``limit`` (default ``_FIELD_CACHE_MAX``; cleared when full); an
    unhashable value (a list) is computed every time."""
    key = (name, value)
    try:
        found = cache.get(key)
    except TypeError:
        return compute(name, value)
    if found is None:
        found = compute(name, value)
        if len(cache) >= (_FIELD_CACHE_MAX if limit is None else limit):
            cache.clear()
        cache[key] = found
    return found


def _encode(name: str, value: Any) -> bytes:
    n, v, m = ofp.oxm_from_user(name, value)
    out = bytearray()
    ofp.oxm_serialize(n, v, m, out, 0)
    return bytes(out)


def _oxm(name: str, value: Any) -> bytes:
    """One field's OXM TLV exactly as os-ken encodes it, kept per (field, value): os-ken's
    generic encoder was ~40 % of serialising an activation's flow-mods."""
    return kept_per_field(_encoded, name, value, _encode)


_UNUSED_WILDCARDS = parser.FlowWildcards().__dict__


class PackedMatch(parser.OFPMatch):
    """An OFPMatch whose fields serialise from ``_oxm``'s cache: the same bytes as os-ken's
    (``tests/unit/controller/compile/test_fastmatch.py`` compares them on every lane shape and campus).

    Built without os-ken's ``__init__``, whose old-API state (a ``FlowWildcards`` and a ``Flow``
    of ~40 attributes, made for every match and again at every serialise to test whether the old
    API was used) was the largest part of compiling a lane; that state is made only if old-API
    code touches it (``__getattr__``)."""

    def __init__(self, _ordered_fields: list[tuple[str, Any]]) -> None:
        self.fields: list[Any] = []
        self.type = ofp.OFPMT_OXM
        self.length: int | None = None  # set by serialize, as os-ken's own
        self._fields2 = _ordered_fields

    def __getattr__(self, name: str) -> Any:
        if name == "_wc":
            self._wc = parser.FlowWildcards()
            return self._wc
        if name == "_flow":
            self._flow = parser.Flow()
            return self._flow
        raise AttributeError(name)

    def _composed_with_old_api(self) -> bool:
        return bool(self.fields and not self._fields2) or (
            "_wc" in self.__dict__ and self._wc.__dict__ != _UNUSED_WILDCARDS
        )

    def serialize(self, buf: bytearray, offset: int) -> int:
        if self._composed_with_old_api():
            return int(super().serialize(buf, offset))
        body = b"".join([_oxm(k, uv) for k, uv in self._fields2])
        length = 4 + len(body)
        pad = -length % 8
        msg_pack_into(f"!HH{len(body)}s{pad}x", buf, offset, ofp.OFPMT_OXM, length, body)
        self.length = length
        return length + pad


class PackedSetField(parser.OFPActionSetField):
    """A set-field action whose field serialises from ``_oxm``'s cache: a lane's rewrites (the
    edge router's MAC, the lane MAC, the NAT address) repeat across lanes, and os-ken's generic
    encoder (netaddr MAC parsing included) was the largest part of serialising an activation.
    Same bytes as os-ken's (``tests/unit/controller/compile/test_fastmatch.py``); an ``OFPActionSetField`` to
    everything that inspects actions."""

    def serialize(self, buf: bytearray, offset: int) -> None:
        if self._composed_with_old_api():
            super().serialize(buf, offset)
            return
        tlv = _oxm(self.key, self.value)
        self.len = (4 + len(tlv) + 7) // 8 * 8
        msg_pack_into(f"!HH{len(tlv)}s{self.len - 4 - len(tlv)}x", buf, offset, self.type, self.len, tlv)


_canonical: dict[tuple[str, Any], tuple[Any, tuple[str, Any]]] = {}  # (field, value) -> (order, field)


def _convert(name: str, value: Any) -> tuple[Any, tuple[str, Any]]:
    n, v = ofp.oxm_normalize_user(name, value)
    num, raw, mask = ofp.oxm_from_user(n, v)
    return num[0] if isinstance(num, tuple) else num, ofp.oxm_to_user(num, raw, mask)


def _canonical_field(name: str, value: Any) -> tuple[Any, tuple[str, Any]]:
    """(os-ken's sort key, the (name, value) pair os-ken keeps) for one field: the normalise ->
    from_user -> to_user round trip ``OFPMatch(**fields)`` makes, kept per (field, value). A lane's
    conntrack state, masked port ranges and addresses repeat across lanes, and the round trip was
    half of compiling a lane (~25 us a field)."""
    return kept_per_field(_canonical, name, value, _convert)


def _order(item: tuple[Any, tuple[str, Any]]) -> Any:
    return item[0]


def exact_match(fields: dict[str, Any]) -> Any:
    """A PackedMatch with the same fields, in the same order, as ``OFPMatch(**fields)``: os-ken's
    per-field conversion is done once per (field, value) and its stable sort by OXM number (which
    keeps experimenter fields such as conntrack's in the order given) is repeated here."""
    items = [_canonical_field(k, v) for k, v in fields.items()]
    items.sort(key=_order)
    return PackedMatch(_ordered_fields=[pair for _, pair in items])
