"""Flow-table budgets through the API: the 409 ``switch_full`` body, /metrics and the console."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.clock import FakeClock
from tests.support.paths import CAMPUS_YAML
from tests.support.ui import sign_in
from tests.support.world import make_world
from viplanes.controller.compile.budget import CompiledCosts
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.topologies.loader import load_topology, parse_topology


def _budgeted_world(tmp_path: Path, extra: int):
    base = CompiledCosts(load_topology(CAMPUS_YAML)).base()
    s1 = sum(n for (sw, _), n in base.items() if sw == "s1")
    data = yaml.safe_load(Path(CAMPUS_YAML).read_text())
    data["switches"][0]["max_flows"] = s1 + extra
    topo = parse_topology(data, "budget.yaml")
    return make_world(f"sqlite:///{tmp_path / 'b.db'}", FakeClock(), MemoryDataplane(), topo), s1


def _ask(world, port: int):
    body = {
        "src_ip": "10.1.0.10",
        "dst_ip": "203.0.113.10",
        "protocol": "tcp",
        "dst_port": port,
        "duration_s": 600,
        "purpose": "sync",
    }
    return world.client.post("/api/v1/lanes", json=body, headers={"Authorization": f"Bearer {world.tokens['alice']}"})


def test_a_full_switch_answers_409_naming_it(tmp_path):
    world, s1 = _budgeted_world(tmp_path, 5)  # the first desktop lane takes 3 entries, the next 2
    assert _ask(world, 9000).status_code == 201
    assert _ask(world, 9001).status_code == 201
    r = _ask(world, 9002)
    assert r.status_code == 409, r.text
    body = r.get_json()
    assert body["error"] == "switch_full" and "s1" in body["message"], body
    assert body["details"] == {"switch": "s1", "table": None, "needed": 2, "left": 0}, body
    metrics = world.client.get("/metrics").text
    assert f'viplanes_switch_flows_used{{switch="s1"}} {float(s1 + 5)}' in metrics
    assert f'viplanes_switch_flows_max{{switch="s1"}} {float(s1 + 5)}' in metrics
    sign_in(world.client, world.tokens["root"])
    page = world.client.get("/ui/switches").text
    assert (
        "Flow-table budgets" in page
        and f"<td data-label=\"Switch\">s1</td><td data-label=\"In use\" class=\"num\">{s1 + 5}</td>" in page
    )
    world.app.extensions["viplanes"].db.dispose()


def test_no_budget_no_gauges(tmp_path):
    topo = load_topology(CAMPUS_YAML)
    world = make_world(f"sqlite:///{tmp_path / 'n.db'}", FakeClock(), MemoryDataplane(), topo)
    assert "viplanes_switch_flows_used" not in world.client.get("/metrics").text
    world.app.extensions["viplanes"].db.dispose()
