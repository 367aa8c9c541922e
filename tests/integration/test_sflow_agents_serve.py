"""A real `viplanes serve` accepts sFlow only from the topology's sampling switches: datagrams
forged from a host's address, with a spoofed agent address, or with samples claiming the input
port of an inter-switch link make no lane and are counted on /metrics; the switch's own samples of
the same kind of flow make one (docs/automatic-lanes.md, "Whose samples count")."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import requests
import yaml

from tests.support.procs import free_port
from tests.support.scrape import wait_grants_indexed
from tests.support.serve import bootstrap, memory_serve
from tests.support.sflowgen import datagram, flow_sample, send
from viplanes.detection.sflow.goflow import GOFLOW2_CACHED

DTN, CLOUD = "198.51.100.30", "203.0.113.10"
CAMPUS = Path(__file__).resolve().parents[2] / "topologies" / "campus.yaml"
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not GOFLOW2_CACHED.exists(), reason="goflow2 not built (make setup)"),
]


def _topology(tmp_path: Path) -> Path:
    """The campus with only s3 sampling: agent 127.0.0.1 sent from 127.0.0.1, the DTN's port 4
    ifIndex 104, the bypass link's port 3 ifIndex 103."""
    data = yaml.safe_load(CAMPUS.read_text())
    for sw in data["switches"]:
        sw.pop("sflow", None)
        if sw["name"] == "s3":
            sw["sflow"] = {"agent": "127.0.0.1", "ifindex": {4: 104, 3: 103}}
    path = tmp_path / "campus-s3.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_only_the_topologys_agents_make_lanes(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "VIPLANES_CONFIG": str(tmp_path / "none.toml"),
        "VIPLANES_SFLOW_ENABLED": "1",
        "VIPLANES_SFLOW_LISTEN": f"127.0.0.1:{port}",
        "VIPLANES_SFLOW_THRESHOLD_MBPS": "50",
    }
    serve = memory_serve(f"sqlite:///{tmp_path}/v.db", tmp_path, env=env, args=("--topology", str(_topology(tmp_path))))
    serve.start()
    try:
        op = {"Authorization": f"Bearer {bootstrap(serve.db_url)}"}
        r = requests.post(f"{serve.url}/api/v1/principals", json={"name": "dana", "role": "researcher"}, headers=op)
        assert r.status_code == 201, r.text
        grant = {"principal": "dana", "src_prefixes": [f"{DTN}/32"], "dst_prefixes": ["203.0.113.0/24"]}
        grant |= {"protocols": ["tcp"], "ports": ["9000-9300"], "max_duration_s": 3600, "max_lanes": 5}
        r = requests.post(f"{serve.url}/api/v1/grants", headers=op, json=grant, timeout=10)
        assert r.status_code == 201, r.text
        policy = {"enabled": True, "min_rate_mbps": 50, "max_auto_lanes": 5}
        r = requests.put(f"{serve.url}/api/v1/grants/{r.json()['id']}/auto", headers=op, json=policy, timeout=10)
        assert r.status_code == 200, r.text
        wait_grants_indexed(f"{serve.url}/metrics", 1, op)  # the acceptor's index refreshes every second
        target = ("127.0.0.1", port)
        for burst in range(40):  # each flow: 40 x 5 samples at 1 in 64 over 0.4 s, ~150 Mbit/s
            seq = burst * 5

            def elephant(dport: int, in_if: int = 104, seq: int = seq) -> list[bytes]:
                return [flow_sample(DTN, CLOUD, 40000, dport, 64, seq=seq + i, in_if=in_if) for i in range(5)]

            send(target, datagram("127.0.0.1", elephant(9100), seq=burst), source="127.0.0.2")  # a host
            send(target, datagram("192.0.2.1", elephant(9101), seq=burst))  # a spoofed agent
            send(target, datagram("127.0.0.1", elephant(9102, in_if=103), seq=burst))  # the bypass link
            send(target, datagram("127.0.0.1", elephant(9103), seq=burst))  # s3's own, the DTN's port
            time.sleep(0.01)
        deadline = time.monotonic() + 10
        lanes: list[dict] = []
        while time.monotonic() < deadline and not lanes:
            lanes = requests.get(f"{serve.url}/api/v1/lanes", headers=op, timeout=10).json()
            time.sleep(0.2)
        time.sleep(2)  # the forged flows had as long as the real one
        lanes = requests.get(f"{serve.url}/api/v1/lanes", headers=op, timeout=10).json()
        got = [(x["dst_port"], (x["trigger"] or {}).get("kind")) for x in lanes]
        assert got == [(9103, "sflow")], got
        metrics = requests.get(f"{serve.url}/metrics", headers=op, timeout=10).text
        # 40 datagrams each (a link-port datagram carries 5 samples); loopback UDP on a loaded
        # machine may lose a few (one run counted 199 of 200), so most, not all, must be counted
        for reason in ("sflow_foreign_source", "sflow_foreign_agent", "sflow_link_port"):
            line = next((m for m in metrics.splitlines() if f'reason="{reason}"' in m), "")
            sent = 40 * (5 if reason == "sflow_link_port" else 1)
            assert line and float(line.split()[-1]) >= 0.9 * sent, (reason, line)
    finally:
        serve.stop()
