"""The Mininet lab with detection from the switches on, for issue 32's lab test and its bench.

A real `viplanes serve` (TLS OpenFlow, userspace OVS) with sFlow detection (goflow2 on a loopback
port the lab's bridges send to), the access switches s1 and s3 sampling 1 in ``sampling`` (8), and a
desktop grant that allows automatic lanes at ``rate_mbps`` (the detector's threshold too, unless
``threshold_mbps`` says lower: docs/automatic-lanes.md). Before a lane the desktop's uploads cross the firewall (~15 Mbit/s);
on it, the bypass (~100).
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests

from tests.support.labcampus import CAMPUS_YAML, VIPLANES, lab_campus
from viplanes.detection.sflow.ifindex import OvsdbIfindexes
from viplanes.detection.sflow.switchconfig import SwitchSampling
from viplanes.lab.dns import free_udp_port
from viplanes.lab.sflowlab import sample_access_switches
from viplanes.topologies.loader import load_topology

DESKTOP, DTN, CLOUD = "10.1.0.10", "198.51.100.30", "203.0.113.10"


class SflowLab:
    """The running lab, the researcher's lanes and iperf3 uploads to the cloud."""

    def __init__(self, net: Any, serve: Any, token: str) -> None:
        self.net, self.serve, self.token = net, serve, token

    def lanes(self) -> list[dict]:
        h = {"Authorization": f"Bearer {self.token}"}
        return requests.get(f"{self.serve.url}/api/v1/lanes", headers=h, params={"limit": 500}, timeout=15).json()

    def lane_of(self, dport: int, state: str = "active", timeout: float = 3.0) -> dict | None:
        deadline = time.monotonic() + timeout
        while True:
            for lane in self.lanes():
                if lane["dst_port"] == dport and lane["state"] == state:
                    return lane
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)

    def stats(self, lane_id: int) -> dict:
        h = {"Authorization": f"Bearer {self.token}"}
        return requests.get(f"{self.serve.url}/api/v1/lanes/{lane_id}/stats", headers=h, timeout=15).json()

    def servers(self, *ports: int) -> list[subprocess.Popen]:
        cloud = self.net.host("cloud")
        procs = [
            cloud.popen(["iperf3", "-s", "-1", "-J", "-p", str(p)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            for p in ports
        ]
        for _ in range(60):
            listening = cloud.cmd("ss -ltn")
            if all(f":{p} " in listening for p in ports):
                break
            time.sleep(0.05)
        return procs

    def upload(self, host: str, port: int, seconds: float, rate: str = "", cport: int = 0) -> subprocess.Popen:
        """iperf3 from ``host`` to the cloud, JSON on stdout (``cport``: the data stream's port)."""
        argv = ["iperf3", "-c", CLOUD, "-p", str(port), "-t", str(seconds), "-J"]
        argv += ["-b", rate] if rate else []
        argv += ["--cport", str(cport)] if cport else []
        return self.net.host(host).popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def port_ifindex(dpid: int, port: int) -> int:
    """The sFlow ifIndex OVS reports for a lab switch's OpenFlow port (its OVSDB ``ifindex``):
    what a forged sample must carry to pass the input-port check (viplanes/detection/sflow/agents.py)."""
    return OvsdbIfindexes({"sw": (dpid, "ovsdb")}).ifindexes("sw")[port]


def stop_all(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(5)


def timestamp(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def mbps(report: dict) -> float:
    """iperf3's received rate, 0 when the connection died before its end report."""
    received = report.get("end", {}).get("sum_received")
    return received["bits_per_second"] / 1e6 if received else 0.0


@contextmanager
def sflow_lab(
    workdir: Path,
    rate_mbps: float = 8,
    idle_s: float = 3,
    sampling: int = 8,
    window_s: float = 0.5,
    max_auto_lanes: int = 3,
    threshold_mbps: float | None = None,
) -> Iterator[SflowLab]:
    """``threshold_mbps``: the detector's threshold, the grant's ``rate_mbps`` unless given."""
    port = free_udp_port()
    env = {
        "VIPLANES_SFLOW_ENABLED": "1",
        "VIPLANES_SFLOW_LISTEN": f"127.0.0.1:{port}",
        "VIPLANES_SFLOW_THRESHOLD_MBPS": str(threshold_mbps or rate_mbps),
        "VIPLANES_SFLOW_WINDOW_S": str(window_s),
        "VIPLANES_AUTO_IDLE_CHECK_S": "0.5",
    }
    os.environ.update(env)  # serve inherits them
    grant = {
        "src_prefixes": [f"{DESKTOP}/32", f"{DTN}/32"],
        "dst_prefixes": ["203.0.113.0/24"],
        "protocols": ["tcp"],
        "ports": ["5201-5299"],
        "max_duration_s": 3600,
        "max_lanes": max_auto_lanes + 2,
    }
    try:
        with lab_campus(workdir, "deskuser", grant) as (net, serve, token):
            target = SwitchSampling(target=f"127.0.0.1:{port}", sampling=sampling, agent="lo")
            bridges = sample_access_switches(net, load_topology(CAMPUS_YAML), target)
            assert bridges == [net.bridge("s1"), net.bridge("s3")], bridges
            op = _operator(serve)
            gid = requests.get(f"{serve.url}/api/v1/grants", headers=op, timeout=10).json()[0]["id"]
            policy = {"enabled": True, "min_rate_mbps": rate_mbps, "idle_s": idle_s, "max_auto_lanes": max_auto_lanes}
            r = requests.put(f"{serve.url}/api/v1/grants/{gid}/auto", headers=op, json=policy, timeout=10)
            assert r.status_code == 200, r.text
            time.sleep(1.2)  # the grant index (the detector's prefilter) refreshes every second
            yield SflowLab(net, serve, token)
    finally:
        for key in env:
            os.environ.pop(key, None)


def _operator(serve: Any) -> dict[str, str]:
    out = subprocess.run(
        [*VIPLANES, "principal", "add", "sflowop", "--role", "operator", "--db", serve.db_url],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return {"Authorization": f"Bearer {out.stdout.strip().splitlines()[-1]}"}
