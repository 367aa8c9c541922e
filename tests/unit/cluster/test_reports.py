"""The master's published view (``viplanes.cluster.reports``) and the bulk lane counters
(``controller.lanestats``): what an API process of the split deployment serves on /readyz and
GET /lanes/<id>/stats, on SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from viplanes.cluster.leader import LeaderLease
from viplanes.cluster.reports import StatusReporter
from viplanes.controller.compile.cookies import BASE_COOKIE, lane_cookie
from viplanes.controller.runtime.lanestats import sum_lane_counters
from viplanes.dataplane.remote import RemoteDataplane
from viplanes.domain.values import LaneCounters
from viplanes.store.db import Database


@dataclass
class Entry:
    cookie: int
    in_port: int
    packets: int
    table_id: int = 0
    match: dict = field(default_factory=dict)
    packet_count: int = 0
    byte_count: int = 0

    def __post_init__(self) -> None:
        self.match = {"in_port": self.in_port}
        self.packet_count, self.byte_count = self.packets, self.packets * 100


def test_sum_lane_counters_counts_ingress_rules_only() -> None:
    ingress = {1: frozenset({(1, 1), (3, 2)}), 2: frozenset({(1, 1), (3, 2)}), 3: frozenset({(4, 1)})}
    stats: dict[int, Any] = {
        1: [
            Entry(lane_cookie(1), 1, 5),
            Entry(lane_cookie(1), 3, 7),  # in_port 3 on s1: the reverse hop
            Entry(lane_cookie(2), 1, 1),
            Entry(BASE_COOKIE, 1, 99),
        ],
        3: [
            Entry(lane_cookie(1), 2, 4),
            Entry(lane_cookie(1), 2, 4, table_id=1),  # table 1: seen again
            Entry(lane_cookie(2), 2, 2),
        ],
        4: None,  # did not answer: lane 3 is left out, not reported as 0
    }
    assert sum_lane_counters(ingress, stats) == {1: LaneCounters(9, 900), 2: LaneCounters(3, 300)}


class FakePlane:
    is_master = True
    epoch = 3

    def __init__(self) -> None:
        self.switches = [{"name": "s1", "dpid": 1, "connected": True, "reconciled": False}]
        self.counted = {7: LaneCounters(10, 1000)}

    def readiness(self) -> dict[str, Any]:
        return {"ready": False, "switches": self.switches}

    def all_lane_counters(self) -> dict[int, LaneCounters]:
        return self.counted


def test_master_report_reaches_the_api_side(db_url: str) -> None:
    ctl_db, api_db = Database(db_url), Database(db_url)
    ctl_db.create_all()
    api = RemoteDataplane(api_db)  # on PostgreSQL its listener thread runs until ``stop``
    try:
        assert api.readiness()["ready"] is False and api.counters(7) is None
        lease = LeaderLease(ctl_db, "ctl-a")
        assert lease.try_acquire() == 1
        plane = FakePlane()
        reporter = StatusReporter(ctl_db, plane, "ctl-a")  # counters: plane.all_lane_counters()
        reporter.round()
        ready = api.readiness()
        assert ready["master"] is True and ready["master_holder"] == "ctl-a" and ready["epoch"] == 1
        assert ready["switches"] == plane.switches and ready["ready"] is False  # s1 not reconciled yet
        counters = api.counters(7)
        assert counters is not None and (counters.packets, counters.bytes) == (10, 1000)
        assert counters.age_s is not None and 0 <= counters.age_s < 2
        plane.switches[0]["reconciled"] = True
        plane.counted = {7: LaneCounters(12, 1200)}
        reporter._next_counters = 0.0
        reporter.round()
        assert api.readiness()["ready"] is True
        got = api.counters(7)  # once: its age moves between two reads
        assert got is not None and got == LaneCounters(12, 1200, got.age_s)
        assert reporter.publish_counters() == 0  # unchanged: no write
        # a report by anyone but the lease holder does not count (a deposed master's last words)
        StatusReporter(ctl_db, plane, "ctl-b").publish_status()
        assert api.readiness()["ready"] is False and api.readiness()["switches"] == []
        plane.is_master = False
        StatusReporter(ctl_db, plane, "ctl-b").round()  # a standby writes nothing
        lease.release()
        gone = api.readiness()
        assert gone["master"] is False and gone["ready"] is False
    finally:
        api.stop()
        ctl_db.dispose()
        api_db.dispose()
