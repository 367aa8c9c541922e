"""Where a switch's own answer (``SwitchFacts``: OFPMP_TABLE_FEATURES, OFPMP_METER_FEATURES)
contradicts what the topology declares about it (docs/hardware.md): one operator line each.

Only contradictions that change what lanes do are reported: too few tables for a multi-table
profile, a declared ``max_flows`` above what the tables we use can hold, meters declared but none
reported. A switch reporting more than declared (OVS: 254 tables) is no problem.
"""

from __future__ import annotations

from collections.abc import Mapping

from viplanes.domain.switchfacts import SwitchFacts
from viplanes.topologies.model import Switch, Topology

MULTI_TABLE_TABLES = 4  # tables 0-3: the conntrack border's recirculation (controller/compile/conntrack.py)


def used_tables(sw: Switch) -> tuple[int, ...]:
    return tuple(range(MULTI_TABLE_TABLES)) if sw.caps.features.multi_table else (0,)


def mismatches(sw: Switch, facts: SwitchFacts) -> list[str]:
    caps = sw.caps
    out: list[str] = []
    if facts.tables is not None:
        missing = [t for t in used_tables(sw) if t not in facts.max_entries]
        if missing:
            out.append(
                f"profile {caps.profile} uses tables {', '.join(map(str, used_tables(sw)))} but the switch "
                f"reports {facts.tables} table(s) without {', '.join(map(str, missing))}: declare "
                f"profile: single_table or multi_table: false"
            )
        room = sum(facts.max_entries.get(t, 0) for t in used_tables(sw))
        if caps.max_flows.total is not None and not missing and caps.max_flows.total > room:
            out.append(
                f"max_flows {caps.max_flows.total} is more than the {room} entries the switch reports for "
                f"table(s) {', '.join(map(str, used_tables(sw)))}: lower max_flows"
            )
        for table, cap in caps.max_flows.tables:
            if table in facts.max_entries and cap > facts.max_entries[table]:
                out.append(
                    f"max_flows for table {table} is {cap}, the switch reports max_entries "
                    f"{facts.max_entries[table]} there: lower it"
                )
    if caps.features.meters and facts.max_meters == 0:
        out.append("meters are declared but the switch reports 0 meters: declare features: {meters: false}")
    return out


def fact_rows(topo: Topology, facts: Mapping[str, SwitchFacts]) -> list[tuple[str, SwitchFacts, list[str]]]:
    """(switch, what it said, its contradictions) for every switch of the topology that said
    anything: the console's Switches page and /metrics."""
    return [(sw.name, facts[sw.name], mismatches(sw, facts[sw.name])) for sw in topo.switches if sw.name in facts]
