"""`viplanes serve` with detection on (VIPLANES_SFLOW_*): goflow2 started and read, a sampled
elephant inside a grant that allows automatic lanes becomes a lane (trigger ``sflow``), while a
flow below the grant's rate, a flow to a port the grant does not name, a forged flood outside every
grant and garbage datagrams get none; goflow2 is gone when serve stops. The datagrams are made by
hand (tests/support/sflowgen.py), as anyone on the network could send them."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import requests
import yaml

from tests.support.procs import free_port
from tests.support.serve import bootstrap, memory_serve
from tests.support.sflowgen import datagram, flow_sample, send
from viplanes.detection.sflow.goflow import GOFLOW2_CACHED

CAMPUS = Path(__file__).resolve().parents[2] / "topologies" / "campus.yaml"
DTN = "198.51.100.30"  # the science DMZ's DTN: a public address, no campus NAT
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not GOFLOW2_CACHED.exists(), reason="goflow2 not built (make setup)"),
]


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def _topology(tmp_path: Path) -> Path:
    """The campus with s1 and s3 sampling (agent 127.0.0.1), their host ports' ifIndexes declared
    (the desktop's s1:1 is 101, the DTN's s3:4 is 104): samples from unknown ports are refused."""
    data = yaml.safe_load(CAMPUS.read_text())
    for sw in data["switches"]:
        if sw["name"] == "s1":
            sw["sflow"] = {"agent": "127.0.0.1", "ifindex": {1: 101}}
        if sw["name"] == "s3":
            sw["sflow"] = {"agent": "127.0.0.1", "ifindex": {4: 104}}
    path = tmp_path / "campus-sampling.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_serve_sights_an_elephant_and_ignores_forgeries(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "VIPLANES_CONFIG": str(tmp_path / "none.toml"),
        "VIPLANES_SFLOW_ENABLED": "1",
        "VIPLANES_SFLOW_LISTEN": f"127.0.0.1:{port}",
        "VIPLANES_SFLOW_THRESHOLD_MBPS": "50",  # as the grant's: docs/automatic-lanes.md
    }
    serve = memory_serve(f"sqlite:///{tmp_path}/v.db", tmp_path, env=env, args=("--topology", str(_topology(tmp_path))))
    serve.start()
    try:
        assert serve.proc is not None
        op = {"Authorization": f"Bearer {bootstrap(serve.db_url)}"}
        r = requests.post(f"{serve.url}/api/v1/principals", json={"name": "dana", "role": "researcher"}, headers=op)
        assert r.status_code == 201, r.text
        grant = {"principal": "dana", "src_prefixes": [f"{DTN}/32", "10.1.0.0/24"], "dst_prefixes": ["203.0.113.0/24"]}
        grant |= {"protocols": ["tcp"], "ports": ["9000-9300"], "max_duration_s": 3600, "max_lanes": 3}
        r = requests.post(f"{serve.url}/api/v1/grants", headers=op, json=grant, timeout=10)
        assert r.status_code == 201, r.text
        gid = r.json()["id"]
        policy = {"enabled": True, "min_rate_mbps": 50, "max_auto_lanes": 3}
        r = requests.put(f"{serve.url}/api/v1/grants/{gid}/auto", headers=op, json=policy, timeout=10)
        assert r.status_code == 200, r.text
        time.sleep(1.5)  # the acceptor's grant index (the detector's prefilter) refreshes every second
        collectors = [c for c in _children(serve.proc.pid) if "goflow2" in Path(f"/proc/{c}/cmdline").read_text()]
        assert len(collectors) == 1
        target = ("127.0.0.1", port)
        send(target, os.urandom(700))  # garbage: goflow2 drops it and lives
        send(target, b"\x00\x00\x00\x05" + os.urandom(300))
        seq = 1
        for burst in range(40):  # 40 x 5 samples of one flow at 1 in 64 over 0.4 s: ~150 Mbit/s
            outside = [flow_sample("172.16.0.5", "198.51.100.9", 1024 + burst, 6000, 1 << 20, seq=seq)]
            inside = [flow_sample(DTN, "203.0.113.10", 40000, 9100, 64, seq=seq + i, in_if=104) for i in range(5)]
            slow = [flow_sample(DTN, "203.0.113.10", 40001, 9101, 16, seq=seq + 5, in_if=104)]  # ~15 Mbit/s
            port22 = [flow_sample(DTN, "203.0.113.10", 40002, 22, 64, seq=seq + 6 + i, in_if=104) for i in range(5)]
            # the desktop's running upload through the campus NAT: a lane would cut it
            natd = [
                flow_sample("10.1.0.10", "203.0.113.10", 40003, 9102, 64, seq=seq + 11 + i, in_if=101) for i in range(5)
            ]
            send(target, datagram("127.0.0.1", inside + outside + slow + port22 + natd, seq=burst))
            seq += 16
            time.sleep(0.01)
        deadline = time.monotonic() + 10
        lanes: list[dict] = []
        while time.monotonic() < deadline:
            lanes = requests.get(f"{serve.url}/api/v1/lanes", headers=op, timeout=10).json()
            if lanes:
                break
            time.sleep(0.2)
        time.sleep(2)  # the slow flow and the port-22 flow had as long as the elephant
        lanes = requests.get(f"{serve.url}/api/v1/lanes", headers=op, timeout=10).json()
        got = [(x["src_port"], x["dst_port"], (x["trigger"] or {}).get("kind")) for x in lanes]
        assert got == [(40000, 9100, "sflow")], got
        assert lanes[0]["state"] == "active", lanes[0]
        metrics = requests.get(f"{serve.url}/metrics", headers=op, timeout=10).text
        assert 'viplanes_auto_sightings_total{outcome="outside_grant"}' in metrics  # the port-22 flow
        assert "172.16.0.5" not in serve.log.read_text()
    finally:
        serve.stop()
    assert not Path(f"/proc/{collectors[0]}").exists() or "zombie" in Path(f"/proc/{collectors[0]}/status").read_text()
