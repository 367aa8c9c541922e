"""NAT in the edge router, in the lab (issue 31): the border s3 declares no ``nat``, the topology
names the edge router as ``nat_router`` (and its route back to the desktops' network via the NAT
box's leg). The lab's edge router then masquerades the private hosts' lanes itself. A desktop
lane leaves s3 untranslated (no set-field, no ``nat()`` on any switch), the cloud sees the edge's
outside address, the replies the router un-translates reach the desktop by the lane, and the
firewall sees none of it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from tests.support.labcampus import CAMPUS_YAML, CLOUD, Campus, lab_campus

pytestmark = pytest.mark.integration
LANE_PORT = 5241
SWITCHES = ("s1", "s2", "s3", "s4")


def router_nat_topology(workdir: Path) -> Path:
    doc = yaml.safe_load(CAMPUS_YAML.read_text())
    for sw in doc["switches"]:
        if sw["name"] == "s3":
            sw["features"] = {"nat": False}
    doc["nat_router"] = "edge"
    doc["edge"]["routes"] = [{"dst": "10.1.0.0/24", "via": "198.51.100.2"}]  # back through the NAT box's leg
    path = workdir / "campus-router-nat.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def campus(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("router_nat")
    grant = {
        "src_prefixes": ["10.1.0.0/24"],
        "dst_prefixes": ["203.0.113.0/24"],
        "protocols": ["tcp"],
        "ports": ["5241-5249"],
        "max_duration_s": 3600,
        "max_lanes": 3,
    }
    with lab_campus(work, "ines", grant, topology=router_nat_topology(work)) as (lab, serve, token):
        yield Campus(lab, serve, token)


def request_when_ready(c: Campus) -> dict:
    deadline = time.monotonic() + 30
    while True:
        body = {"src_ip": "10.1.0.10", "dst_ip": CLOUD, "protocol": "tcp", "dst_port": LANE_PORT}
        r = c.api("POST", "/lanes", json={**body, "duration_s": 900, "purpose": "router nat"})
        if r.status_code != 503 or time.monotonic() > deadline:
            assert r.status_code == 201, r.text
            return r.json()
        time.sleep(0.5)


def test_a_nat_lane_is_translated_by_the_edge_router(campus: Campus, record_property) -> None:
    c = campus
    lane = request_when_ready(c)
    assert lane["state"] == "active", lane
    for sw in SWITCHES:
        out = c.lab.switch(sw).cmd(f"ovs-ofctl -O OpenFlow13 dump-flows {c.lab.bridge(sw)}")
        assert lane["nat_ip"] not in out, (sw, out)  # neither set-field nor nat(src=) anywhere
        assert "set_field:10.1.0.10->ip_src" not in out and "mod_nw_src" not in out
    fw0 = c.fw_rx_bytes()
    mbps, seen, sent = c.iperf(LANE_PORT)
    assert seen == "203.0.113.1"  # translated by the edge router, not by the switch
    assert c.fw_rx_bytes() - fw0 < 0.01 * sent  # both directions by the lane
    masq = c.lab.host("edge").cmd("iptables -t nat -L POSTROUTING -v -n")
    assert "MASQUERADE" in masq and "10.1.0.0/24" in masq
    print(f"\nrouter-NAT lane: {mbps:.1f} Mbit/s, the cloud saw {seen}")
    record_property("router_nat_lane_mbps", round(mbps, 1))
