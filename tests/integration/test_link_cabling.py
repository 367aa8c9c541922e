"""A topology file that does not match the cables (issue 42): the lab is wired from
topologies/campus-redundant.yaml, serve is given the same campus with the two ports of the
transit switch on the DTN's best lane path exchanged (two patch cables swapped). Within 10 s
/readyz and `viplanes doctor` name both links as miscabled, with the declared and the observed
switch ports, and a DTN lane is active over the other two-hop bypass path, not over them.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.integration.test_doctor_lab import doctor, readiness
from tests.support.labcampus import CLOUD, lab_campus
from tests.support.paths import REPO

pytestmark = pytest.mark.integration

REDUNDANT = REPO / "topologies" / "campus-redundant.yaml"
UDP_PORT = 5301
GRANT = {
    "src_prefixes": ["198.51.100.30/32"],
    "dst_prefixes": ["203.0.113.0/24"],
    "protocols": ["udp"],
    "ports": ["5301"],
    "max_duration_s": 3600,
    "max_lanes": 2,
}


def _rx(bridge: str, port: int) -> int:
    return int(Path(f"/sys/class/net/{bridge}-eth{port}/statistics/rx_packets").read_text())


def test_swapped_cables_are_named_and_the_lane_goes_around_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIPLANES_LINK_PROBE_S", "1")  # the session turns them off for bare bridges
    from viplanes.topologies.loader import load_topology
    from viplanes.topologies.paths import lane_path

    path = lane_path(load_topology(REDUNDANT), "dtn")
    transit, other = path[1].switch, ("s7" if path[1].switch == "s6" else "s6")
    declared = tmp_path / "declared.yaml"  # the file says port 1 where the cable is in port 2
    text = REDUNDANT.read_text()
    text = (
        text.replace(f'"{transit}:1"', "@@").replace(f'"{transit}:2"', f'"{transit}:1"').replace("@@", f'"{transit}:2"')
    )
    declared.write_text(text)
    # declared links through the transit (e.g. s5:2-s6:2 and s6:1-s3:6) whose cables are swapped
    links = [f"{ln.a}-{ln.b}" for ln in load_topology(declared).links if transit in (ln.a.switch, ln.b.switch)]
    built: list[float] = []  # when the lab's switches were up and pointed at serve
    with lab_campus(
        tmp_path,
        "vera",
        GRANT,
        topology=declared,
        wiring=REDUNDANT,
        prepare=lambda net, serve: built.append(time.monotonic()),
    ) as (lab, serve, token):
        started = built[0]
        body = ""
        while time.monotonic() - started < 10:
            body = readiness(serve).text
            if all(f'"{name}"' in body for name in links) and body.count("miscabled") >= 2:
                break
            time.sleep(0.2)
        named_after = time.monotonic() - started
        print(f"\nmiscabling named {named_after:.1f} s after the lab was built: {body}")
        assert named_after < 10, body
        ready = readiness(serve)
        assert ready.status_code == 503
        views = {link["name"]: link for link in ready.json()["links"]}
        for name in links:
            assert views[name]["state"] == "unverified" and "miscabled" in views[name]["reason"], views[name]
        # the declared end and the one the probes really reached are both named
        reasons = " | ".join(views[name]["reason"] for name in links)
        assert f"probes from s5:2 arrive at {transit}:1" in reasons and f"{transit}:1 hears s5:2" in reasons, reasons
        assert all(v["state"] == "up" for n, v in views.items() if n not in links), views
        code, report = doctor(serve)
        found = {c["check"]: c for c in report["checks"]}
        for name in links:
            assert found[f"link {name}"]["status"] == "FAIL" and "miscabled" in found[f"link {name}"]["detail"]
        assert code != 0

        r = requests.post(
            f"{serve.url}/api/v1/lanes",
            headers={"Authorization": f"Bearer {token}"},
            timeout=15,
            json={
                "src_ip": "198.51.100.30",
                "dst_ip": CLOUD,
                "protocol": "udp",
                "dst_port": UDP_PORT,
                "duration_s": 600,
                "purpose": "cabling test",
            },
        )
        assert r.status_code == 201 and r.json()["state"] == "active", r.text
        dtn = lab.host("dtn")
        via_other, via_transit = _rx(lab.bridge(other), 1), _rx(lab.bridge(transit), 1)
        send = dtn.popen(
            [sys.executable, "-m", "tests.support.linkprobe", "udp-send", CLOUD, str(UDP_PORT), "500", "1"],
            cwd=str(REPO),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, _ = send.communicate(timeout=30)
        sent = int(out.split()[-1])  # 500 unloaded; a starved sender sends fewer in its 1 s
        carried = _rx(lab.bridge(other), 1) - via_other
        strayed = _rx(lab.bridge(transit), 1) - via_transit
        print(f"lane datagrams: {carried} of {sent} through {other}, {strayed} through {transit}")
        assert sent >= 100 and carried >= 0.8 * sent and strayed < 20, (sent, carried, strayed)
