"""Flow-table budgets and a switch's own table-full, on the real lab (Mininet, OVS, `viplanes
serve`), issue 31:

- s1 (the access switch) declares ``max_flows`` a dozen entries above its base flows: desktop
  lanes fill it (3 entries for the first, 2 for each next) and the next request is refused 409
  ``switch_full`` naming s1, with no flow changed on any switch;
- s2 declares no budget, but its OVS table 0 is limited (``Flow_Table flow_limit``, overflow
  refused): a lane that does not fit ends ``failed`` with "s2's flow table is full
  (OFPFMFC_TABLE_FULL)" and leaves no flow behind on any switch.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.support.labcampus import CLOUD, Campus, base_flows, campus_with, lab_campus

pytestmark = pytest.mark.integration
SWITCHES = ("s1", "s2", "s3", "s4")
HEADROOM = 12


def s1_base() -> int:
    return base_flows("s1")


def budgeted_topology(workdir: Path) -> Path:
    return campus_with(workdir, "campus-budget.yaml", "s1", max_flows=s1_base() + HEADROOM)


@pytest.fixture(scope="module")
def campus(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("budgets")
    grant = {
        "src_prefixes": ["10.1.0.0/24"],
        "dst_prefixes": ["203.0.113.0/24"],
        "protocols": ["tcp"],
        "ports": ["9000-9100"],
        "max_duration_s": 3600,
        "max_lanes": 20,
    }
    with lab_campus(work, "hana", grant, topology=budgeted_topology(work)) as (lab, serve, token):
        yield Campus(lab, serve, token)


def flows(c: Campus, switch: str, table: int | None = None) -> list[str]:
    where = f" table={table}" if table is not None else ""
    out = c.lab.switch(switch).cmd(f"ovs-ofctl -O OpenFlow13 dump-flows {c.lab.bridge(switch)}{where}")
    return [line for line in out.splitlines() if "cookie=" in line]


def all_flows(c: Campus) -> dict[str, list[str]]:
    """Every switch's flows, without counters (they move with traffic)."""
    strip = ("duration=", "n_packets=", "n_bytes=", "idle_age=", "hard_age=")
    return {
        sw: sorted(" ".join(w for w in line.split() if not w.startswith(strip)) for line in flows(c, sw))
        for sw in SWITCHES
    }


def ask(c: Campus, port: int):
    body = {"src_ip": "10.1.0.10", "dst_ip": CLOUD, "protocol": "tcp", "dst_port": port, "duration_s": 900}
    return c.api("POST", "/lanes", json={**body, "purpose": "budget test"})


def wait_base(c: Campus) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(flows(c, "s1")) < s1_base():
        time.sleep(0.2)
    assert len(flows(c, "s1")) == s1_base(), "s1's base flows are not what the compiler counts"


def test_requests_fill_s1_and_the_next_is_refused_switch_full(campus: Campus):
    c = campus
    wait_base(c)
    made = []
    for port in range(9000, 9010):
        r = ask(c, port)
        if r.status_code != 201:
            break
        assert r.json()["state"] == "active", r.json()
        made.append(r.json()["id"])
    assert len(made) == 5, made  # 3 + 4 x 2 = 11 of 12 entries
    assert len(flows(c, "s1")) == s1_base() + 11  # the switch holds exactly what was counted
    before = all_flows(c)
    r = ask(c, 9010)
    assert r.status_code == 409, r.text
    body = r.json()
    assert body["error"] == "switch_full" and body["details"] == {"switch": "s1", "table": None, "needed": 2, "left": 1}
    assert all_flows(c) == before  # nothing written anywhere
    metrics = requests.get(f"{c.serve.url}/metrics", timeout=10).text
    assert f'viplanes_switch_flows_used{{switch="s1"}} {float(s1_base() + 11)}' in metrics
    assert f'viplanes_switch_flows_max{{switch="s1"}} {float(s1_base() + HEADROOM)}' in metrics
    for lane_id in made:
        assert c.api("POST", f"/lanes/{lane_id}/release").status_code == 200
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(flows(c, "s1")) > s1_base():
        time.sleep(0.2)
    assert len(flows(c, "s1")) == s1_base()


def test_a_switch_table_full_fails_the_lane_with_no_partial_flows(campus: Campus):
    c = campus
    wait_base(c)
    bridge = c.lab.bridge("s2")
    limit = len(flows(c, "s2", table=0)) + 1  # room for one entry; a desktop lane needs 3 on s2
    subprocess.run(
        ["ovs-vsctl", "--", "--id=@ft", "create", "Flow_Table", f"flow_limit={limit}", "overflow_policy=refuse",
         "--", "set", "Bridge", bridge, "flow_tables:0=@ft"],
        check=True, timeout=10,
    )  # fmt: skip
    try:
        before = all_flows(c)
        r = ask(c, 9020)
        lane = r.json()
        if r.status_code == 201:
            lane = c.api("GET", f"/lanes/{lane['id']}").json()
        assert lane.get("state") == "failed", (r.status_code, lane)
        assert "OFPET_FLOW_MOD_FAILED code 1: s2's flow table is full (OFPFMFC_TABLE_FULL)" in lane["reason"]
        time.sleep(1.0)  # any late removal has landed
        assert all_flows(c) == before  # no partial flows on s1, s2 or s3
    finally:
        subprocess.run(["ovs-vsctl", "clear", "Bridge", bridge, "flow_tables"], check=True, timeout=10)
