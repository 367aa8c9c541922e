"""`viplanes serve` with its embedded OpenFlow controller and real (userspace) OVS bridges.

Four bridges named ``vlsrv<pid>-sN`` with the campus dpids connect over TLS (the lab PKI) to the
served controller; a lane requested over HTTP must come back ``active`` with its flows on the
switches, and vanish from them when released. Also measures the end-to-end latency of a lane request (HTTP in, barriers back).
No hosts are attached: the flows only need to be accepted by the switches.
"""

from __future__ import annotations

import statistics
import subprocess
import time

import pytest
import requests

from tests.support.ovs import add_bridge, lane_flows
from tests.support.procs import free_port
from tests.support.runtag import ifname
from tests.support.serve import bootstrap, openflow_serve, setup_researcher

pytestmark = pytest.mark.integration
PREFIX = ifname("vlsrv", longest_suffix="-s4")


@pytest.fixture
def served_campus(tmp_path):
    of_port = free_port()
    serve = openflow_serve(f"sqlite:///{tmp_path / 'of.db'}", tmp_path, of_port)
    op = bootstrap(serve.db_url)
    bridges = [f"{PREFIX}-s{n}" for n in (1, 2, 3, 4)]
    try:
        serve.start()
        for n, br in enumerate(bridges, start=1):
            add_bridge(br, n, f"ssl:127.0.0.1:{of_port}")
        yield serve, op, bridges
    finally:
        for br in bridges:
            subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", br], capture_output=True, timeout=20)
        serve.stop()


def test_lane_through_serve_reaches_the_switches(served_campus, record_property):
    serve, op, bridges = served_campus
    tok = setup_researcher(serve.url, op, max_lanes=5)
    h = {"Authorization": f"Bearer {tok}"}
    body = {
        "src_ip": "10.1.0.10",
        "dst_ip": "203.0.113.10",
        "protocol": "tcp",
        "dst_port": 9000,
        "duration_s": 300,
        "purpose": "openflow integration",
    }
    deadline = time.monotonic() + 20
    lane = None
    while time.monotonic() < deadline:  # 503 switches_not_ready until every switch is reconciled
        r = requests.post(f"{serve.url}/api/v1/lanes", json=body, headers=h, timeout=10)
        lane = r.json()
        if r.status_code == 201 and lane["state"] == "active":
            break
        assert r.status_code == 503 and lane["error"] == "switches_not_ready", lane
        time.sleep(0.3)
    assert lane is not None and lane["state"] == "active", lane
    assert lane_flows(bridges[0], lane["id"]), "no lane flow on the access switch"

    r = requests.post(f"{serve.url}/api/v1/lanes/{lane['id']}/release", headers=h, timeout=10)
    assert r.json()["state"] == "released"
    assert not lane_flows(bridges[0], lane["id"])

    latencies = []
    with requests.Session() as s:
        s.headers.update(h)
        for port in range(9001, 9041):
            t0 = time.perf_counter()
            got = s.post(f"{serve.url}/api/v1/lanes", json={**body, "dst_port": port}, timeout=10).json()
            latencies.append((time.perf_counter() - t0) * 1000)
            assert got["state"] == "active", got
            s.post(f"{serve.url}/api/v1/lanes/{got['id']}/release", timeout=10)
    p50 = statistics.median(latencies)
    record_property("lane_request_p50_ms", round(p50, 2))
    print(f"\nlane request over HTTP with 4 OVS switches: p50 {p50:.1f} ms, max {max(latencies):.1f} ms")
    assert p50 < 100  # generous: the benchmark, not this test, holds the 10 ms target
