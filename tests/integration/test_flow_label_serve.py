"""A real `viplanes serve` on the dual-stack campus whose topology says it marks scitags in the
IPv6 flow label: one sampled packet of a marked DTN upload (one sFlow datagram through the gate
and goflow2) makes its automatic lane, trigger ``flow_label``; a packet labelled with another
experiment (a random RFC 6437 label) makes none (docs/automatic-lanes.md, "The IPv6 flow label")."""

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
from tests.support.sflowgen import datagram, flow_sample6, send
from viplanes.detection.sflow.flowlabel import encode
from viplanes.detection.sflow.goflow import GOFLOW2_CACHED

DTN6, CLOUD6 = "2001:db8:3::30", "2001:db8:ff::10"
DUAL = Path(__file__).resolve().parents[2] / "topologies" / "campus-dualstack.yaml"
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not GOFLOW2_CACHED.exists(), reason="goflow2 not built (make setup)"),
]


def test_one_marked_sample_makes_a_lane(tmp_path: Path) -> None:
    data = yaml.safe_load(DUAL.read_text())
    data["ipv6_flow_label"] = {"scheme": "scitags", "experiments": [16]}
    for sw in data["switches"]:
        if sw["name"] == "s3":  # no lab bridge to learn from: the DTN's port 4 declared as ifIndex 4
            sw["sflow"] = {"agent": "127.0.0.1", "ifindex": {4: 4}}
    topo = tmp_path / "dual-marks.yaml"
    topo.write_text(yaml.safe_dump(data))
    port = free_port()
    env = {
        **os.environ,
        "VIPLANES_CONFIG": str(tmp_path / "none.toml"),
        "VIPLANES_SFLOW_ENABLED": "1",
        "VIPLANES_SFLOW_LISTEN": f"127.0.0.1:{port}",
    }
    serve = memory_serve(f"sqlite:///{tmp_path}/v.db", tmp_path, env=env, args=("--topology", str(topo))).start()
    try:
        op = {"Authorization": f"Bearer {bootstrap(serve.db_url)}"}
        r = requests.post(f"{serve.url}/api/v1/principals", json={"name": "dana", "role": "researcher"}, headers=op)
        assert r.status_code == 201, r.text
        grant = {"principal": "dana", "src_prefixes": [f"{DTN6}/128"], "dst_prefixes": ["2001:db8:ff::/48"]}
        grant |= {"protocols": ["tcp"], "ports": ["5201-5299"], "max_duration_s": 3600, "max_lanes": 3}
        r = requests.post(f"{serve.url}/api/v1/grants", headers=op, json=grant, timeout=10)
        assert r.status_code == 201, r.text
        policy = {"enabled": True, "fireflies": True, "max_auto_lanes": 3}
        r = requests.put(f"{serve.url}/api/v1/grants/{r.json()['id']}/auto", headers=op, json=policy, timeout=10)
        assert r.status_code == 200, r.text
        wait_grants_indexed(f"{serve.url}/metrics", 1, op)  # the acceptor's index refreshes every second
        marked = flow_sample6(DTN6, CLOUD6, 40000, 5201, 64, encode(16, 14, 21), in_if=4)
        other = flow_sample6(DTN6, CLOUD6, 40001, 5202, 64, encode(17, 14, 21), seq=2, in_if=4)
        sent = time.monotonic()
        send(("127.0.0.1", port), datagram("127.0.0.1", [marked, other]))  # s3 (agent 127.0.0.1)
        lanes: list[dict] = []
        while time.monotonic() < sent + 10 and not lanes:
            lanes = requests.get(f"{serve.url}/api/v1/lanes", headers=op, timeout=10).json()
        took = time.monotonic() - sent
        print(f"\none marked sample -> lane active (seen through the API) in {took * 1000:.0f} ms")
        time.sleep(1.5)  # the other experiment's sample had as long
        lanes = requests.get(f"{serve.url}/api/v1/lanes", headers=op, timeout=10).json()
        got = [(x["src_ip"], x["src_port"], x["dst_port"], x["state"], (x["trigger"] or {}).get("kind")) for x in lanes]
        assert got == [(DTN6, 40000, 5201, "active", "flow_label")], got
        assert lanes[0]["trigger"]["experiment"] == "16" and lanes[0]["trigger"]["activity"] == "14"
        metrics = requests.get(f"{serve.url}/metrics", headers=op, timeout=10).text
        assert 'viplanes_flow_label_samples_total{outcome="flow_label_other"} 1.0' in metrics, metrics[-2000:]
    finally:
        serve.stop()
