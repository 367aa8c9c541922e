"""Issue 31: what a switch answers about itself (TABLE_FEATURES, METER_FEATURES) reaches
`viplanes doctor` through /api/v1/readiness, so a topology that claims a hardware switch has multiple
tables or meters when the switch says otherwise is a FAIL naming the switch, before a lane is
refused at install time. Before, /readyz carried no features and doctor could only say "not
reported by the switch"."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.world import World
from viplanes.cli.doctor.checks import FAIL, OK
from viplanes.cli.doctor.features import check_features
from viplanes.domain.switchfacts import SwitchFacts, learned_features
from viplanes.topologies.model import Topology


def test_only_answered_facts_become_features() -> None:
    assert learned_features(SwitchFacts()) == {}
    assert learned_features(SwitchFacts(tables=1)) == {"multi_table": False}
    assert learned_features(SwitchFacts(tables=254, max_meters=0)) == {"multi_table": True, "meters": False}
    assert learned_features(SwitchFacts(max_meters=200)) == {"meters": True}


@pytest.fixture
def single_table_s1(world: World, topo: Topology, monkeypatch: pytest.MonkeyPatch) -> World:
    """s1 answers as a one-table switch without meters; the others did not answer."""
    plane = world.dataplane
    switches = [{"name": sw.name, "dpid": sw.dpid, "connected": True} for sw in topo.switches]

    def readiness() -> dict[str, Any]:
        return {"ready": True, "switches": [dict(s) for s in switches]}

    monkeypatch.setattr(plane, "readiness", readiness)
    monkeypatch.setattr(plane, "switch_facts", lambda: {"s1": SwitchFacts(tables=1, max_meters=0)})
    return world


def test_readyz_carries_each_switch_s_own_answers(single_table_s1: World) -> None:
    body = single_table_s1.client.get("/api/v1/readiness", headers=single_table_s1.h("root")).json
    by_name = {s["name"]: s for s in body["switches"]}
    assert by_name["s1"]["features"] == {"multi_table": False, "meters": False}
    assert "features" not in by_name["s2"]  # nothing answered: nothing claimed


def test_doctor_fails_a_profile_the_switch_contradicts(single_table_s1: World, topo: Topology) -> None:
    report = single_table_s1.client.get("/api/v1/readiness", headers=single_table_s1.h("root")).json
    found = {f.check: f for f in check_features(topo, report)}
    assert found["features s1"].status == FAIL, found["features s1"]
    assert "multi_table" in found["features s1"].detail and "meters" in found["features s1"].detail
    assert found["features s2"].status == OK
