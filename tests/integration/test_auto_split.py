"""Automatic lanes in the split deployment (issue 32): the master `viplanes controller cluster`
runs the acceptor, the idle ender and the firefly listener; the API processes run none, and a
standby binds no port. A firefly from the DTN to the controllers' listener address makes an
active lane with trigger ``firefly`` while the API is a separate process (PostgreSQL, two
controllers, four userspace OVS bridges: tests/support/scaleout_kit.py)."""

from __future__ import annotations

import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.fireflies import HEADER, firefly_json
from tests.support.procs import free_port, wait_for
from tests.support.scaleout_kit import lane_flows, lease_holder_pid, scaleout_cluster
from tests.support.scrape import wait_grants_indexed

pytestmark = [pytest.mark.integration, pytest.mark.postgres]
DTN, CLOUD = "198.51.100.30", "203.0.113.10"


def _checksum(data: bytes) -> int:
    data += b"\0" * (len(data) % 2)
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    return ~(total + (total >> 16)) & 0xFFFF


def send_from(src: str, port: int, payload: bytes) -> None:
    """One UDP datagram to 127.0.0.1:``port`` from ``src`` (a raw socket on loopback: the test
    machine holds no campus address; on a campus the DTN sends from its own)."""
    udp = struct.pack("!HHHH", 41234, port, 8 + len(payload), 0) + payload
    ip = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, socket.inet_aton(src), bytes([127, 0, 0, 1])
    )
    ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW) as s:
        s.sendto(ip + udp, ("127.0.0.1", 0))


def udp_owners(port: int) -> str:
    return subprocess.run(["ss", "-Hlunp", f"sport = :{port}"], capture_output=True, text=True, timeout=10).stdout


@pytest.fixture
def split(pg_cluster, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch) -> Iterator[dict]:
    port = free_port()
    monkeypatch.setenv("VIPLANES_FIREFLY_PORT", str(port))  # every role reads it; only the master binds
    monkeypatch.setenv("VIPLANES_FIREFLY_HOST", "127.0.0.1")
    monkeypatch.setenv("VIPLANES_AUTO_IDLE_CHECK_S", "0.5")
    with scaleout_cluster(pg_cluster, tmp_path, request) as running:
        running["ff_port"] = port
        yield running


def test_a_firefly_to_the_master_controller_makes_a_lane(split) -> None:
    url, op, port = split["url"], {"Authorization": f"Bearer {split['op']}"}, split["ff_port"]
    r = requests.post(f"{url}/api/v1/principals", json={"name": "dana", "role": "researcher"}, headers=op, timeout=10)
    assert r.status_code == 201, r.text
    grant = {"principal": "dana", "src_prefixes": [f"{DTN}/32"], "dst_prefixes": ["203.0.113.0/24"]}
    grant |= {"protocols": ["tcp"], "ports": ["5201-5299"], "max_duration_s": 3600, "max_lanes": 3}
    r = requests.post(f"{url}/api/v1/grants", headers=op, json=grant, timeout=10)
    assert r.status_code == 201, r.text
    policy = {"enabled": True, "fireflies": True, "idle_s": 600}
    r = requests.put(f"{url}/api/v1/grants/{r.json()['id']}/auto", headers=op, json=policy, timeout=10)
    assert r.status_code == 200, r.text

    assert wait_for(lambda: lease_holder_pid(split["db"]) is not None, 30)
    master = lease_holder_pid(split["db"])
    assert wait_for(lambda: f"pid={master}," in udp_owners(port), 15), udp_owners(port)
    standby = [c.proc.pid for c in split["ctl"] if c.proc.pid != master]
    assert standby and all(f"pid={p}," not in udp_owners(port) for p in standby)  # a standby binds no port
    assert f"pid={split['api'].proc.pid}," not in udp_owners(port)  # nor does the API

    by_pid = {c.proc.pid: c for c in split["ctl"]}  # the acceptor runs on the master: its /metrics
    wait_grants_indexed(f"http://127.0.0.1:{by_pid[master].metrics_port}/metrics", 1)
    sent = time.monotonic()
    firefly = HEADER.format(host="dtn") + firefly_json("start", DTN, CLOUD, 50001, 5201)
    send_from(DTN, port, firefly.encode())
    lane: dict = {}

    def active() -> bool:
        nonlocal lane
        lanes = requests.get(f"{url}/api/v1/lanes", headers=op, timeout=10).json()
        lane = next((x for x in lanes if x["state"] == "active"), {})
        return bool(lane)

    assert wait_for(active, 15), requests.get(f"{url}/api/v1/lanes", headers=op, timeout=10).json()
    took = time.monotonic() - sent
    print(f"\nsplit deployment: firefly -> lane active (seen through the API) in {took * 1000:.0f} ms")
    assert (lane["src_ip"], lane["src_port"], lane["dst_port"]) == (DTN, 50001, 5201)
    assert lane["trigger"]["kind"] == "firefly" and lane["principal"] == "dana"
    assert wait_for(lambda: bool(lane_flows(split["bridges"][2], lane["id"])), 10)  # on s3, the DTN's switch

    # a firefly naming the DTN's flow from another address is refused, as in serve
    send_from(
        "198.51.100.31", port, (HEADER.format(host="x") + firefly_json("start", DTN, CLOUD, 50002, 5202)).encode()
    )
    time.sleep(1.5)
    lanes = requests.get(f"{url}/api/v1/lanes", headers=op, timeout=10).json()
    assert [x["src_port"] for x in lanes] == [50001]

    # the refusal is counted where the acceptor runs: the master controller's /metrics
    scraped = requests.get(f"http://127.0.0.1:{by_pid[master].metrics_port}/metrics", timeout=10).text
    assert "viplanes_controller_master 1.0" in scraped, scraped[:400]
    counted = [ln for ln in scraped.splitlines() if ln.startswith("viplanes_auto_sightings_total")]
    assert any('outcome="lanes"' in ln for ln in counted), counted
    assert any('outcome="spoofed_firefly"' in ln for ln in counted), counted
    scraped = requests.get(f"http://127.0.0.1:{by_pid[standby[0]].metrics_port}/metrics", timeout=10).text
    assert "viplanes_controller_master 0.0" in scraped and "viplanes_auto_sightings" not in scraped
