"""Read one ``switches[i]`` entry: its dpid, role, certificate pins, conntrack bounds, what it
can hold (``capfields``) and its sFlow agent (``sflowfields``).

Split from ``loader.py`` so each section of a campus file has its own reader; problems go to the
shared :class:`~viplanes.topologies.fields.FieldReader` like every other field's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from viplanes.topologies.capfields import read_capabilities
from viplanes.topologies.fields import FieldReader, kind_of
from viplanes.topologies.model import Switch
from viplanes.topologies.sflowfields import read_sflow

DPID_MAX = 2**64 - 1
CT_FIELDS = ("ct_new_per_s", "ct_zone_limit", "ct_appctl", "ct_limits_external")  # Switch: conntrack bounds per lane
CT_VALUE_MAX = 2**31 - 1
CAP_FIELDS = ("profile", "features", "max_flows")  # Switch: what it can hold (profiles.py)


def read_switch(reader: FieldReader, item: Any, where: str, earlier: Sequence[Switch]) -> Switch | None:
    """One ``switches[i]`` entry; ``earlier``: the switches read before it (their dpids are taken)."""
    m = reader.mapping(
        item, where, ("name", "dpid"), ("role", "cert_sha256", "conntrack", "sflow", *CT_FIELDS, *CAP_FIELDS)
    )
    if m is None:
        return None
    name = reader.name(m.get("name"), f"{where}.name") if "name" in m else None
    if name is not None:
        reader.switch_names.add(name)  # even if its dpid is bad: avoid follow-on "unknown switch"
    dpid = m.get("dpid")
    if "dpid" in m and (isinstance(dpid, bool) or not isinstance(dpid, int) or not 1 <= dpid <= DPID_MAX):
        reader.bad(f"{where}.dpid", f"expected an integer 1..2**64-1, got {dpid!r}")
        dpid = None
    elif dpid is not None and any(s.dpid == dpid for s in earlier):
        reader.bad(f"{where}.dpid", f"duplicate dpid {dpid}")
        dpid = None
    role = m.get("role", "campus")
    if not isinstance(role, str):
        reader.bad(f"{where}.role", f"expected a string, got {kind_of(role)}")
    conntrack = m.get("conntrack", True)
    if not isinstance(conntrack, bool):
        reader.bad(f"{where}.conntrack", f"expected true or false, got {kind_of(conntrack)}")
    caps = read_capabilities(reader, m, f"{where} ({name})" if name else where)  # a file has many switches
    if caps is None or name is None or dpid is None or not isinstance(role, str) or not isinstance(conntrack, bool):
        return None
    pins = _pins(reader, m.get("cert_sha256"), f"{where}.cert_sha256")
    ct = _ct_settings(reader, m, where)
    sflow = read_sflow(reader, m["sflow"], f"{where}.sflow") if m.get("sflow") is not None else None
    return Switch(
        name=name,
        dpid=dpid,
        role=role,
        cert_sha256=pins,
        conntrack=caps.features.conntrack,
        caps=caps,
        sflow=sflow,
        **ct,
    )


def _ct_settings(reader: FieldReader, m: dict[str, Any], where: str) -> dict[str, Any]:
    """``ct_new_per_s`` / ``ct_zone_limit`` (positive integers), ``ct_appctl`` (a string),
    ``ct_limits_external`` (a boolean)."""
    out: dict[str, Any] = {}
    for key in ("ct_new_per_s", "ct_zone_limit"):
        if key in m:
            value = m[key]
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= CT_VALUE_MAX:
                reader.bad(f"{where}.{key}", f"expected an integer 1..{CT_VALUE_MAX}, got {value!r}")
            else:
                out[key] = value
    if "ct_appctl" in m:
        if not isinstance(m["ct_appctl"], str):
            reader.bad(f"{where}.ct_appctl", f"expected a string, got {kind_of(m['ct_appctl'])}")
        else:
            out["ct_appctl"] = m["ct_appctl"]
    if "ct_limits_external" in m:
        if not isinstance(m["ct_limits_external"], bool):
            reader.bad(f"{where}.ct_limits_external", f"expected true or false, got {m['ct_limits_external']!r}")
        else:
            out["ct_limits_external"] = m["ct_limits_external"]
    return out


def _pins(reader: FieldReader, value: Any, where: str) -> tuple[str, ...]:
    """``cert_sha256``: one hex SHA-256 or a list of them (a rotation window)."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    pins = []
    for item in items:
        text = item.replace(":", "").lower() if isinstance(item, str) else ""
        if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
            reader.bad(where, f"expected the hex SHA-256 of a certificate (64 hex digits), got {item!r}")
            continue
        pins.append(text)
    return tuple(pins)
