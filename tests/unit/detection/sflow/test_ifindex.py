"""Learning a sampling switch's ifIndexes from OVSDB (viplanes/detection/sflow/ifindex.py): the JSON of
one ``ovs-vsctl`` call parsed to OpenFlow port -> ifIndex of the bridge with the switch's datapath
id, re-read at most every few seconds, and a database that does not answer is not asked often.
tests/integration/test_sflow_ovsdb_ifindex.py reads a real one."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from viplanes.detection.sflow import ifindex
from viplanes.detection.sflow.ifindex import OvsdbIfindexes, ovsdb_argv, parse_ifindexes


def _tables(dpid: str = "0000000000000003") -> str:
    bridges = {
        "headings": ["datapath_id", "ports"],
        "data": [
            [dpid, ["set", [["uuid", "p1"], ["uuid", "p4"]]]],
            ["0000000000000001", ["uuid", "q1"]],
        ],
    }
    ports = {
        "headings": ["_uuid", "interfaces"],
        "data": [[["uuid", "p1"], ["uuid", "i1"]], [["uuid", "p4"], ["uuid", "i4"]], [["uuid", "q1"], ["uuid", "j1"]]],
    }
    ifaces = {
        "headings": ["_uuid", "ofport", "ifindex"],
        "data": [
            [["uuid", "i1"], 1, 101],
            [["uuid", "i4"], 4, ["set", []]],  # not up yet: no ifindex
            [["uuid", "j1"], 1, 201],
        ],
    }
    return "\n".join(json.dumps(t) for t in (bridges, ports, ifaces)) + "\n"


def test_the_bridge_of_the_datapath_id_is_read() -> None:
    assert parse_ifindexes(_tables(), 3) == {1: 101}
    assert parse_ifindexes(_tables(), 1) == {1: 201}
    assert parse_ifindexes(_tables(), 9) == {}


def test_the_target_goes_to_ovs_vsctl() -> None:
    assert "--db=tcp:192.0.2.3:6640" in ovsdb_argv("tcp:192.0.2.3:6640")
    assert not any(a.startswith("--db") for a in ovsdb_argv("ovsdb"))


class Run:
    def __init__(self, ok: bool = True) -> None:
        self.calls = 0
        self.ok = ok

    def __call__(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls += 1
        return subprocess.CompletedProcess(argv, 0 if self.ok else 1, _tables() if self.ok else "", "no db")


def test_reads_are_bounded_and_a_dead_database_is_left_alone() -> None:
    now = [0.0]
    run = Run()
    learned = OvsdbIfindexes({"s3": (3, "ovsdb")}, run=run, clock=lambda: now[0])
    assert learned.ifindexes("s3") == {1: 101} and run.calls == 1
    for _ in range(10):
        learned.ifindexes("s3", fresh=True)
    assert run.calls == 1  # within REFRESH_S: no new read
    now[0] += ifindex.REFRESH_S
    learned.ifindexes("s3", fresh=True)
    assert run.calls == 2
    run.ok = False
    now[0] += ifindex.REFRESH_S
    assert learned.ifindexes("s3", fresh=True) == {1: 101}  # what it knew stays
    now[0] += ifindex.REFRESH_S
    learned.ifindexes("s3", fresh=True)
    assert run.calls == 3  # a failed read: the next only after FAILED_S
    assert learned.ifindexes("unknown") == {}
