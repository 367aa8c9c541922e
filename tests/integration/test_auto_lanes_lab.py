"""Issue 32 in the lab: fireflies from the DTN make automatic lanes in a real `viplanes serve`
(TLS OpenFlow, userspace OVS, Mininet), a firefly from another host for the DTN's flow makes none,
a firefly `end` ends its lane, and an automatic lane ends after its idle time once traffic stops.

    desktop -s1- s2 ==bypass== s3 - edge - s4 - cloud      dtn on s3 (198.51.100.30)

The fireflies reach the controller over a veth per sending host (tests/support/fireflies.py).
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import subprocess
import time
from typing import Any

import pytest
import requests

from tests.support.fireflies import firefly_json, firefly_links, send_firefly
from tests.support.labcampus import iperf_client, lab_campus
from viplanes.lab.dns import free_udp_port

pytestmark = pytest.mark.integration
DTN, DESKTOP, CLOUD = "198.51.100.30", "10.1.0.10", "203.0.113.10"


class Lab:
    def __init__(self, net: Any, serve: Any, token: str, op: dict[str, str], port: int, links: dict[str, str]):
        self.net, self.serve, self.token, self.op, self.port, self.links = net, serve, token, op, port, links

    def api(self, method: str, path: str, as_op: bool = False, **kw: Any) -> requests.Response:
        h = self.op if as_op else {"Authorization": f"Bearer {self.token}"}
        return requests.request(method, f"{self.serve.url}/api/v1{path}", timeout=15, headers=h, **kw)

    def fire(self, state: str, sport: int, dport: int = 5201, host: str = "dtn", src: str = DTN) -> float:
        return send_firefly(self.net, host, self.links[host], self.port, firefly_json(state, src, CLOUD, sport, dport))

    def lane_of(self, sport: int, timeout: float = 10.0, state: str = "active") -> dict | None:
        deadline = time.monotonic() + timeout
        while True:
            for lane in self.api("GET", "/lanes", params={"src_ip": DTN}).json():
                if lane["src_port"] == sport and lane["state"] == state:
                    return lane
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    port = free_udp_port()
    os.environ["VIPLANES_FIREFLY_PORT"] = str(port)  # serve inherits it: the listener is on
    os.environ["VIPLANES_AUTO_IDLE_CHECK_S"] = "0.5"
    workdir = tmp_path_factory.mktemp("autolanes")
    grant = {
        "src_prefixes": [f"{DTN}/32"],
        "dst_prefixes": ["203.0.113.0/24"],
        "protocols": ["tcp"],
        "ports": ["5201-5299"],
        "max_duration_s": 3600,
        "max_lanes": 10,
    }
    try:
        with lab_campus(workdir, "dtnuser", grant) as (net, serve, token):
            op = _operator(workdir, serve)
            grants = requests.get(f"{serve.url}/api/v1/grants", headers=op, timeout=10).json()
            policy = {"enabled": True, "fireflies": True, "idle_s": 3, "max_auto_lanes": 10}
            r = requests.put(f"{serve.url}/api/v1/grants/{grants[0]['id']}/auto", headers=op, json=policy, timeout=10)
            assert r.status_code == 200, r.text
            with firefly_links(net, {"dtn": DTN, "desktop": DESKTOP}) as links:
                time.sleep(1.2)  # the acceptor's grant index refreshes every second
                yield Lab(net, serve, token, op, port, links)
    finally:
        os.environ.pop("VIPLANES_FIREFLY_PORT", None)
        os.environ.pop("VIPLANES_AUTO_IDLE_CHECK_S", None)


def _operator(workdir: Any, serve: Any) -> dict[str, str]:
    from tests.support.labcampus import VIPLANES

    out = subprocess.run(
        [*VIPLANES, "principal", "add", "autoop", "--role", "operator", "--db", f"sqlite:///{workdir / 'viplanes.db'}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return {"Authorization": f"Bearer {out.stdout.strip().splitlines()[-1]}"}


def _ts(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_a_firefly_from_the_dtn_makes_a_lane_within_half_a_second(lab: Lab) -> None:
    delays = []
    for i in range(5):
        sport = 46000 + i
        sent = lab.fire("start", sport)
        lane = lab.lane_of(sport)
        assert lane is not None, f"no lane for firefly {i}"
        assert lane["trigger"]["kind"] == "firefly" and lane["trigger"]["reporter"] == DTN
        delays.append(_ts(lane["activated_at"]) - sent)
    p50 = statistics.median(delays)
    print(f"\nfirefly -> active lane: p50 {p50 * 1000:.0f} ms, max {max(delays) * 1000:.0f} ms over {len(delays)}")
    assert p50 < 0.5, delays


def test_a_firefly_from_another_host_for_the_dtns_flow_gets_no_lane(lab: Lab) -> None:
    lab.fire("start", 47000, host="desktop", src=DTN)  # the desktop claims the DTN's flow
    assert lab.lane_of(47000, timeout=1.5) is None


def test_the_refusals_are_on_metrics(lab: Lab) -> None:
    text = requests.get(f"{lab.serve.url}/metrics", timeout=10).text
    assert 'viplanes_auto_sightings_total{outcome="spoofed_firefly"} 1.0' in text, text[-2000:]
    assert 'viplanes_firefly_datagrams_total{outcome="accepted"}' in text


def test_a_firefly_end_ends_its_lane(lab: Lab) -> None:
    lab.fire("start", 48000)
    lane = lab.lane_of(48000)
    assert lane is not None
    lab.fire("end", 48000)
    assert lab.lane_of(48000, state="released") is not None


def test_an_automatic_lane_ends_after_its_idle_time_once_traffic_stops(lab: Lab) -> None:
    cloud, dtn = lab.net.host("cloud"), lab.net.host("dtn")
    lab.fire("start", 49000, dport=5202)
    lane = lab.lane_of(49000)
    assert lane is not None
    server = cloud.popen(["iperf3", "-s", "-1", "-p", "5202"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            if ":5202 " in cloud.cmd("ss -ltn"):
                break
            time.sleep(0.05)
        dtn.cmd(iperf_client(CLOUD, 5202, 5, "--cport 49000"))  # longer than idle_s: traffic keeps it
        stopped = time.monotonic()
        assert lab.lane_of(49000, timeout=0.1) is not None, "ended while carrying traffic"
        stats = lab.api("GET", f"/lanes/{lane['id']}/stats").json()
        assert stats["bytes"] > 1_000_000, stats
        ended = lab.lane_of(49000, state="released", timeout=10)
        took = time.monotonic() - stopped
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(5)
    assert ended is not None
    print(f"\nidle end {took:.1f} s after the traffic stopped (idle_s 3)")
    assert took <= 3 + 3  # idle time + a stats round + the 0.5 s check period
