"""Issue 11 on the dual-stack lab campus: `viplanes serve` (TLS OpenFlow) + Mininet + userspace OVS.

    desktop -s1- s2 ==bypass== s3 - edge - s4 - cloud (203.0.113.10-12, 2001:db8:ff::10)
                 |             |
                 fw --------- nat           default path: fw (15 Mbit/s cap), v4 NAT'd, v6 routed

One network and one serve process for the module; tests build on each other (baselines first).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any

import pytest
import requests

from tests.support.labcampus import COUNTERS_S, LANE_OVER_FIREWALL, REPO, VIPLANES, iperf_client, lab_campus
from viplanes.lab.servechild import ServeChild

pytestmark = pytest.mark.integration
CLOUDS = ("203.0.113.10", "203.0.113.11", "203.0.113.12")
CLOUD6 = "2001:db8:ff::10"
CLOUD6_EXTRA = "2001:db8:ff::11"
NAME = "s3.cloud.lab"  # served by dnsmasq: the 3 A records and 2 AAAA records
DESKTOP6 = "2001:db8:1::10"


DUALSTACK = REPO / "topologies" / "campus-dualstack.yaml"


class Lab:
    def __init__(self, lab: Any, serve: ServeChild, token: str, workdir: Any) -> None:
        self.lab, self.serve, self.token, self.workdir = lab, serve, token, workdir
        self.results: dict[str, float] = {}

    def api(self, method: str, path: str, **kw: Any) -> requests.Response:
        return requests.request(
            method,
            f"{self.serve.url}/api/v1{path}",
            timeout=15,
            headers={"Authorization": f"Bearer {self.token}"},
            **kw,
        )

    def lane(self, **fields: Any) -> dict:
        body = {"src_ip": "10.1.0.10", "protocol": "tcp", "duration_s": 900, "purpose": "lane sets test", **fields}
        r = self.api("POST", "/lanes", json=body)
        assert r.status_code == 201, r.text
        lane = r.json()
        assert lane["state"] == "active", lane
        return lane

    def lane_bytes(self, lane_id: int, at_least: int = 0) -> int:
        deadline = time.monotonic() + COUNTERS_S  # userspace OVS pushes datapath counters lazily
        while True:
            stats = self.api("GET", f"/lanes/{lane_id}/stats").json()
            if stats["bytes"] >= at_least or time.monotonic() > deadline:
                return int(stats["bytes"])
            time.sleep(0.3)

    def fw_rx_bytes(self) -> int:
        return int(self.lab.host("fw").cmd("cat /sys/class/net/fw-in/statistics/rx_bytes"))

    def iperf(self, dst: str, port: int, seconds: float = 2) -> tuple[float, int]:
        """desktop -> dst TCP: (Mbit/s received, bytes)."""
        cloud, desktop = self.lab.host("cloud"), self.lab.host("desktop")
        server = cloud.popen(
            ["iperf3", "-s", "-1", "-J", "-p", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            for _ in range(50):
                if f":{port} " in cloud.cmd("ss -ltn"):
                    break
                time.sleep(0.05)
            client = json.loads(desktop.cmd(iperf_client(dst, port, seconds)))
            assert not client.get("error"), client.get("error")
            server.communicate(timeout=15)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait(5)
        received = client["end"]["sum_received"]
        return received["bits_per_second"] / 1e6, int(received["bytes"])


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    from viplanes.lab.dns import LabDns, free_udp_port

    dns_port = free_udp_port()
    os.environ["VIPLANES_DNS_SERVER"] = f"127.0.0.1:{dns_port}"  # serve's resolver: the lab DNS
    workdir = tmp_path_factory.mktemp("lanesets")
    dns: list[Any] = []

    def prepare(net: Any, serve: ServeChild) -> None:
        cloud = net.host("cloud")
        for extra in CLOUDS[1:]:  # the cloud host holds every address of the set
            cloud.cmd(f"ip addr add {extra}/24 dev cloud-eth0")
        cloud.cmd(f"ip -6 addr add {CLOUD6_EXTRA}/64 dev cloud-eth0 nodad")
        dns.append(LabDns(net, NAME, [*CLOUDS, CLOUD6, CLOUD6_EXTRA], controller_port=dns_port).start())

    try:
        with lab_campus(
            workdir,
            "alice",
            {
                "src_prefixes": ["10.1.0.0/24", "2001:db8:1::/64"],
                "dst_prefixes": ["203.0.113.0/24", "2001:db8:ff::/64"],
                "protocols": ["tcp"],
                "ports": ["5201-5299", "9000"],
                "max_duration_s": 3600,
                "max_lanes": 5,
            },
            topology=DUALSTACK,
            prepare=prepare,
        ) as (net, serve, token):
            try:
                yield Lab(net, serve, token, workdir)
            finally:
                for d in dns:  # before the network it runs in goes away
                    d.stop()
                dns.clear()
    finally:
        os.environ.pop("VIPLANES_DNS_SERVER", None)
        for d in dns:
            d.stop()


def test_firewall_path_baselines_v4_and_v6(lab: Lab) -> None:
    desktop = lab.lab.host("desktop")
    assert "0% packet loss" in desktop.cmd(f"ping -c 2 -W 2 {CLOUDS[0]}")
    assert "0% packet loss" in desktop.cmd(f"ping -6 -c 2 -W 2 {CLOUD6}"), desktop.cmd("ip -6 route")
    for name, dst in (("fw_v4", CLOUDS[0]), ("fw_v6", CLOUD6)):
        fw0 = lab.fw_rx_bytes()
        mbps, sent = lab.iperf(dst, 5299)
        assert lab.fw_rx_bytes() - fw0 >= sent * 0.9, name  # through the firewall
        assert mbps < 20, (name, mbps)
        lab.results[name] = mbps


def test_name_lane_carries_transfers_to_each_address(lab: Lab) -> None:
    """The lane names the host; the server resolves it at the lab's DNS (3 A, 2 AAAA records)."""
    lane = lab.lane(dst_host=NAME, dst_port=5201)
    assert sorted(lane["dst_nets"]) == sorted([f"{a}/32" for a in CLOUDS] + [f"{CLOUD6}/128", f"{CLOUD6_EXTRA}/128"])
    seen = lab.lab.host("desktop").cmd(f"getent ahosts {NAME}")  # the desktop's own resolver
    assert all(a in seen for a in CLOUDS), seen
    before = lab.lane_bytes(lane["id"])
    for dst in CLOUDS:
        fw0 = lab.fw_rx_bytes()
        mbps, sent = lab.iperf(dst, 5201, seconds=1)
        assert lab.fw_rx_bytes() - fw0 < 0.01 * sent, dst  # not through the firewall
        after = lab.lane_bytes(lane["id"], before + sent)
        assert after - before >= sent, (dst, after - before, sent)  # on the lane's counters
        before = after
        print(f"\nset lane -> {dst}: {mbps:.1f} Mbit/s")


def test_port_range_lane_carries_two_ports_of_the_range(lab: Lab) -> None:
    lane = lab.lane(dst_ip=CLOUDS[0], dst_ports="5210-5217")
    # 5210-5211, 5212-5215, 5216-5217: 3 masked entries; 2 x 3 hops x 3 + 2 conntrack reply rules
    assert lane["match_count"] == 3 and lane["flow_count"] == 2 * 3 * 3 + 4
    for port in (5211, 5216):
        fw0 = lab.fw_rx_bytes()
        mbps, sent = lab.iperf(CLOUDS[0], port)
        assert lab.fw_rx_bytes() - fw0 < 0.01 * sent, port
        print(f"\nport-range lane :{port}: {mbps:.1f} Mbit/s vs firewall {lab.results['fw_v4']:.1f}")
        assert mbps >= LANE_OVER_FIREWALL * lab.results["fw_v4"]


def test_v6_lane_at_2x_the_firewall_path(lab: Lab) -> None:
    lane = lab.lane(src_ip=DESKTOP6, dst_ip=CLOUD6, dst_port=5202)
    fw0 = lab.fw_rx_bytes()
    mbps, sent = lab.iperf(CLOUD6, 5202)
    assert lab.fw_rx_bytes() - fw0 < 0.01 * sent
    assert lab.lane_bytes(lane["id"], sent) >= sent
    print(f"\nv6 lane: {mbps:.1f} Mbit/s vs firewall v6 {lab.results['fw_v6']:.1f}")
    assert mbps >= LANE_OVER_FIREWALL * lab.results["fw_v6"]


def test_transfer_wraps_rclone_through_a_name_lane_with_checksums(lab: Lab) -> None:
    """`viplanes transfer -- rclone copy` (CMD run in the desktop's namespace with mnexec): the
    S3 endpoint is the name with 5 addresses; the upload crosses the lane, not the firewall; the
    checksums match; the lane is released when rclone exits."""
    import hashlib

    from viplanes.lab.services import ACCESS_KEY, SECRET_KEY, clean_env, rclone_binary

    store = lab.workdir / "s3"
    (store / "lab").mkdir(parents=True)
    (store / "base").mkdir()
    data = lab.workdir / "data"
    data.mkdir()
    for i in range(4):  # 42 MB: large enough that rclone's own start-up (~1 s) is not the measure
        (data / f"part{i}.bin").write_bytes(os.urandom(10 * 1024 * 1024))
    cloud, desktop = lab.lab.host("cloud"), lab.lab.host("desktop")
    server = cloud.popen(
        [rclone_binary(), "serve", "s3", "--addr", ":9000", "--auth-key", f"{ACCESS_KEY},{SECRET_KEY}", str(store)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=clean_env(),
    )
    try:
        for _ in range(50):
            if ":9000 " in cloud.cmd("ss -ltn"):
                break
            time.sleep(0.1)
        env = clean_env(
            {
                "VIPLANES_API_URL": lab.serve.url,
                "VIPLANES_TOKEN": lab.token,
                "RCLONE_CONFIG_CLOUD_TYPE": "s3",
                "RCLONE_CONFIG_CLOUD_PROVIDER": "Rclone",
                "RCLONE_CONFIG_CLOUD_ACCESS_KEY_ID": ACCESS_KEY,
                "RCLONE_CONFIG_CLOUD_SECRET_ACCESS_KEY": SECRET_KEY,
                "RCLONE_CONFIG_CLOUD_ENDPOINT": f"http://{NAME}:9000",
                "RCLONE_CONFIG_CLOUD_FORCE_PATH_STYLE": "true",
            }
        )
        t0 = time.monotonic()  # the firewall path first: rclone alone, no lane
        base = subprocess.run(
            ["mnexec", "-a", str(desktop.pid), rclone_binary(), "copy", "--transfers", "4", str(data), "cloud:base"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        base_s = time.monotonic() - t0
        assert base.returncode == 0, base.stderr
        fw0 = lab.fw_rx_bytes()
        t0 = time.monotonic()
        done = subprocess.run(
            [
                *VIPLANES,
                "transfer",
                "--src",
                "10.1.0.10",
                "--dst",
                NAME,
                "--dst-ports",
                "9000",
                "--require-lane",
                "--",
                "mnexec",
                "-a",
                str(desktop.pid),
                rclone_binary(),
                "copy",
                "--transfers",
                "4",
                str(data),
                "cloud:lab",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        took = time.monotonic() - t0
        assert done.returncode == 0, done.stderr
        sent = sum(f.stat().st_size for f in data.iterdir())
        assert lab.fw_rx_bytes() - fw0 < 0.01 * sent, "the upload crossed the firewall"
        for f in data.iterdir():
            assert (
                hashlib.sha256((store / "lab" / f.name).read_bytes()).digest()
                == hashlib.sha256(f.read_bytes()).digest()
            ), f.name
        lanes = lab.api("GET", "/lanes").json()
        lane = next(ln for ln in lanes if ln["dst_ports"] == ["9000"])
        assert lane["state"] == "released" and lane.get("dst_host") == NAME, lane
        base_mbps, lane_mbps = sent * 8 / base_s / 1e6, sent * 8 / took / 1e6
        print(
            f"\nrclone copy {sent / 1e6:.1f} MB: firewall path {base_mbps:.1f} Mbit/s ({base_s:.1f} s); "
            f"viplanes transfer -- rclone copy {lane_mbps:.1f} Mbit/s including lane set-up and "
            f"release ({took:.1f} s, {lane_mbps / base_mbps:.1f}x); wrapper said: {done.stderr.strip().splitlines()[-1]}"
        )
        # every run on record gave 3.86-5.4x on this shared 2-vCPU VM; an interleaved A/B showed no
        # loss from that session's code (docs/benchmarks.md, "A read-first clock"); that the upload
        # took the lane is the firewall counter's check above, this one says the lane is much faster.
        # The lane's rate falls with the machine's load, the firewall's cap does not, and this rate
        # includes the lane's set-up and release: the lab's bar less a quarter for those
        assert lane_mbps >= 0.75 * LANE_OVER_FIREWALL * base_mbps
    finally:
        server.terminate()
        server.wait(5)
