"""What the controller learns from the switches themselves, kept per switch name for the lane
service (``Dataplane.switch_facts``): the tables and meters a switch reports at connect
(OFPMP_TABLE_FEATURES, OFPMP_METER_FEATURES) and, when it refuses a flow for a full table below
the budget the topology declared, how many of our entries it held then (docs/hardware.md).

Why learn instead of trusting ``max_flows``: a switch shared with another application, or whose
real table is smaller than declared, fails a lane at activation; after the first such failure
the budget counts against what the switch really held, so later requests are refused 409
``switch_full`` up front instead of being written and rolled back.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile.cookies import ALL_APP_FLOWS
from viplanes.controller.runtime.pending import Batch
from viplanes.controller.runtime.switches import SwitchState
from viplanes.controller.runtime.wire import Wire
from viplanes.domain.switchfacts import SwitchFacts
from viplanes.topologies.capfacts import mismatches

LOG = logging.getLogger("viplanes.controller.runtime.switchfacts")
TABLE_FULL = (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_TABLE_FULL)


class FactBook:
    """Switch name -> :class:`SwitchFacts`; written by the runtime's threads, read by the lane
    service's request threads (one lock, copies out)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._facts: dict[str, SwitchFacts] = {}

    def snapshot(self) -> dict[str, SwitchFacts]:
        with self._lock:
            return dict(self._facts)

    def features(self, switch: str, tables: int, max_entries: Mapping[int, int], max_meters: int | None) -> None:
        with self._lock:
            old = self._facts.get(switch, SwitchFacts())
            self._facts[switch] = dataclasses.replace(
                old, tables=tables, max_entries=dict(max_entries), max_meters=max_meters
            )

    def full(self, switch: str, held: int) -> bool:
        """The switch refused an entry while holding ``held`` of ours; True when that lowers what
        it is known to hold (a later, larger count is a table freed by someone else: kept low)."""
        with self._lock:
            old = self._facts.get(switch, SwitchFacts())
            if old.full_at is not None and old.full_at <= held:
                return False
            self._facts[switch] = dataclasses.replace(old, full_at=held)
            return True


def table_full_dpids(batches: Iterable[Batch]) -> list[int]:
    """The switches whose answer to a batch included OFPFMFC_TABLE_FULL."""
    return sorted({b.dpid for b in batches if any((t, c) == TABLE_FULL for _, t, c in b.errors)})


def learn_full(state: SwitchState, wire: Wire, book: FactBook, dpids: Iterable[int]) -> None:
    """Count our entries on each switch that said its table is full (before the failed lane's
    rollback, so the count is what the switch held when it refused) and lower its known max."""
    for dpid in dpids:
        held = wire.flow_count(dpid, *ALL_APP_FLOWS)
        if held is None:
            LOG.warning("%s said its flow table is full; its flows could not be counted", state.switch_name(dpid))
            continue
        name = state.short_name(dpid)
        sw = state.topology.switch_by_dpid(dpid) if state.topology else None
        declared = sw.caps.max_flows.total if sw is not None else None
        if book.full(name, held):
            LOG.warning(
                "%s refused a flow: its table is full at %d of our entries (max_flows %s); "
                "lanes are now counted against %d on it",
                state.switch_name(dpid),
                held,
                declared if declared is not None else "not declared",
                held,
            )


# ---- table and meter features, asked at connect ----------------------------------------------
def parse_table_features(body: Iterable[Any]) -> tuple[int, dict[int, int]]:
    """OFPTableFeaturesStats entries -> (tables reported, table id -> max_entries)."""
    entries = {int(t.table_id): int(t.max_entries) for t in body}
    return len(entries), entries


def parse_meter_features(body: Iterable[Any]) -> int | None:
    """OFPMeterFeaturesStats -> the meters the switch holds (None: no answer)."""
    for f in body:
        return int(f.max_meter)
    return None


def ask_features(state: SwitchState, wire: Wire, book: FactBook, dpid: int, timeout_s: float = 5.0) -> list[str]:
    """Ask a switch that just connected for its tables and meters, keep the answer, and log
    where it contradicts the topology's profile; the mismatches (empty when none or no answer)."""
    tables = wire.ask(dpid, parser.OFPTableFeaturesStatsRequest(None, 0, []), timeout_s)
    meters = wire.ask(dpid, parser.OFPMeterFeaturesStatsRequest(None, 0), timeout_s)
    if not tables:  # no answer, or an empty one: nothing to compare
        LOG.info("%s did not describe its tables (OFPMP_TABLE_FEATURES)", state.switch_name(dpid))
        return []
    count, max_entries = parse_table_features(tables)
    name = state.short_name(dpid)
    book.features(name, count, max_entries, parse_meter_features(meters or []))
    sw = state.topology.switch_by_dpid(dpid) if state.topology else None
    found = mismatches(sw, book.snapshot()[name]) if sw is not None else []
    for line in found:
        LOG.warning("%s: %s", state.switch_name(dpid), line)
    return found
