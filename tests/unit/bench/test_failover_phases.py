"""The fail-over benchmark's phases (``bench/suite/failover_phases.py``) from a new master's log."""

from __future__ import annotations

from datetime import datetime

from bench.suite.failover_phases import phases, table


def _at(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


LOG = """2026-11-29 10:00:00,900 viplanes.cluster.leader INFO lease controller: standby (epoch 3, holder b)
2026-11-29 10:00:01,010 viplanes.controller.runtime.resync INFO s1: not reconciled, this controller may not write
2026-11-29 10:00:01,500 viplanes.cluster.leader INFO lease controller: now MASTER (epoch 4, holder b)
2026-11-29 10:00:01,510 viplanes.controller.openflow.roles INFO role MASTER (generation 4) on 2 switches in 9 ms
2026-11-29 10:00:01,560 viplanes.controller.runtime.lane_runtime INFO reconciled s1: kept 9, added 0
2026-11-29 10:00:01,590 viplanes.controller.runtime.lane_runtime INFO reconciled s2: kept 9, added 0
"""


def test_a_takeover_at_the_expiry_is_cut_into_its_phases() -> None:
    killed = _at("2026-11-29 10:00:00,000")
    got = phases(LOG, killed, killed + 1.45, killed + 1.61, killed + 1.63, switches=2)
    assert {k: round(v * 1000) for k, v in got.items()} == {
        "expiry": 1450,
        "take": 50,
        "roles": 10,
        "reconcile": 80,
        "activate": 20,
        "answer": 20,
    }
    assert "expiry" in table([got])


def test_a_takeover_before_the_expiry_counts_from_the_kill() -> None:
    """The dead master's session ended: its lease's end was never waited for."""
    killed = _at("2026-11-29 10:00:01,400")
    got = phases(LOG, killed, killed + 1.2, killed + 0.21, killed + 0.23, switches=2)
    assert "expiry" not in got and round(got["take"] * 1000) == 100
