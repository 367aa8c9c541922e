"""Read a switch's ``profile`` / ``features`` / ``max_flows`` (and ``nat_router``) from YAML."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from viplanes.topologies.fields import FieldReader, kind_of
from viplanes.topologies.profiles import FEATURES, FLOWS_MAX, PROFILES, TABLE_MAX, Capabilities, FlowLimit


def read_capabilities(reader: FieldReader, m: dict[str, Any], where: str) -> Capabilities | None:
    """``profile`` / ``features`` / ``max_flows`` of one switch mapping; None after a problem
    (noted on ``reader`` as ``FILE: switches[i].KEY: what is wrong``)."""
    ok = True
    profile = m.get("profile", "ovs")
    if profile not in PROFILES:
        reader.bad(f"{where}.profile", f"expected one of {', '.join(PROFILES)}, got {profile!r}")
        ok = False
        profile = "ovs"
    features = PROFILES[profile]
    overrides = m.get("features")
    if overrides is not None:
        if not isinstance(overrides, dict):
            reader.bad(f"{where}.features", f"expected a mapping of feature: true/false, got {kind_of(overrides)}")
            ok = False
        else:
            for key, value in overrides.items():
                if key not in FEATURES:
                    reader.bad(f"{where}.features.{key}", f"unknown feature (known: {', '.join(FEATURES)})")
                    ok = False
                elif not isinstance(value, bool):
                    reader.bad(f"{where}.features.{key}", f"expected true or false, got {kind_of(value)}")
                    ok = False
                else:
                    features = replace(features, **{key: value})
    if "conntrack" in m and isinstance(m["conntrack"], bool):
        # the older key (the loader checks its type): an override that must agree with features
        if isinstance(overrides, dict) and overrides.get("conntrack", m["conntrack"]) != m["conntrack"]:
            reader.bad(f"{where}.conntrack", "contradicts features.conntrack; keep one of them")
            ok = False
        features = replace(features, conntrack=m["conntrack"])
    if ok and features.conntrack and not features.meters:
        # a conntrack border meters each lane's new connections (controller/compile/ctlane.py)
        reader.bad(f"{where}.features", "conntrack needs meters (new connections are metered); set conntrack: false")
        ok = False
    limit = _flow_limit(reader, m.get("max_flows"), f"{where}.max_flows") if "max_flows" in m else FlowLimit()
    if limit is None or not ok:
        return None
    if not features.multi_table and any(t != 0 for t, _ in limit.tables):
        reader.bad(f"{where}.max_flows.tables", "a switch without multi_table has only table 0")
        return None
    return Capabilities(profile=profile, features=features, max_flows=limit)


def read_nat_router(reader: FieldReader, value: Any, translators: list[str]) -> str:
    """``nat_router``: the edge router or a NAT middlebox that translates NAT'd lanes."""
    if not isinstance(value, str) or value not in translators:
        reader.bad(
            "nat_router", f"expected the edge router or a NAT middlebox ({', '.join(translators)}), got {value!r}"
        )
        return ""
    return value


def _count(reader: FieldReader, value: Any, where: str) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= FLOWS_MAX:
        reader.bad(where, f"expected an integer 1..{FLOWS_MAX}, got {value!r}")
        return None
    return value


def _flow_limit(reader: FieldReader, value: Any, where: str) -> FlowLimit | None:
    """An integer (the total) or ``{total: N, tables: {TABLE: N}}``."""
    if not isinstance(value, dict):
        total = _count(reader, value, where)
        return FlowLimit(total=total) if total is not None else None
    m = reader.mapping(value, where, (), ("total", "tables"))
    if m is None:
        return None
    total = _count(reader, m["total"], f"{where}.total") if "total" in m else None
    if "total" in m and total is None:
        return None
    tables_in = m.get("tables", {})
    if not isinstance(tables_in, dict):
        reader.bad(f"{where}.tables", f"expected a mapping of table id: entries, got {kind_of(tables_in)}")
        return None
    tables: list[tuple[int, int]] = []
    for table, n in tables_in.items():
        if isinstance(table, bool) or not isinstance(table, int) or not 0 <= table <= TABLE_MAX:
            reader.bad(f"{where}.tables", f"table id must be an integer 0..{TABLE_MAX}, got {table!r}")
            return None
        count = _count(reader, n, f"{where}.tables.{table}")
        if count is None:
            return None
        tables.append((table, count))
    if total is None and not tables:
        reader.bad(where, "give total or tables")
        return None
    return FlowLimit(total=total, tables=tuple(sorted(tables)))
