"""The split deployment as test fixtures (issue 12): PostgreSQL, two `viplanes controller cluster`
processes, one `viplanes api --workers 2`, four userspace OVS bridges each connected over TLS to
both controllers (``set-controller BR ssl:A ssl:B``); and what the tests read back from the
switches (flows by lane cookie, with durations and packet counters; the switches' view of roles).

Shared by test_scaleout.py (failover, deposed master) and test_scaleout_faults.py (the faults
under load: kill -9 during requests, an API worker, PostgreSQL restart).
"""

from __future__ import annotations

import os
import re
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.ovs import add_bridge, vsctl
from tests.support.procs import free_port, lab_security_args, stop_process, wait_for, wait_healthy
from tests.support.runtag import ifname
from tests.support.serve import bootstrap, lane_body

PREFIX = ifname("vlso", longest_suffix="-s4")
VIPLANES = [sys.executable, "-m", "viplanes.cli.main"]
_STAT = re.compile(r"(duration|n_packets|n_bytes|hard_age|idle_age)=[^ ,]+,? ?")


@dataclass(frozen=True)
class FlowStat:
    duration_s: float
    n_packets: int


def lane_flow_stats(bridge: str, lane_id: int) -> dict[str, FlowStat]:
    """match+actions -> (duration, packets) of the lane's flows (its cookie) on the bridge."""
    from viplanes.controller.compile.cookies import lane_cookie

    out = subprocess.run(
        ["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge], check=True, capture_output=True, text=True, timeout=20
    ).stdout
    flows = {}
    for line in out.splitlines():
        if line.split()[0] == f"cookie={lane_cookie(lane_id):#x},":
            duration = float(re.search(r"duration=([\d.]+)s", line).group(1))  # type: ignore[union-attr]
            packets = int(re.search(r"n_packets=(\d+)", line).group(1))  # type: ignore[union-attr]
            flows[_STAT.sub("", line)] = FlowStat(duration, packets)
    return flows


def lane_flows(bridge: str, lane_id: int) -> dict[str, float]:
    """match+actions -> duration (s) of the lane's flows (its cookie) on the bridge."""
    return {key: stat.duration_s for key, stat in lane_flow_stats(bridge, lane_id).items()}


def lane_cookies(bridge: str) -> set[int]:
    """Every lane cookie on the bridge (the controller's lane cookie space only)."""
    from viplanes.controller.compile.cookies import lane_cookie

    out = subprocess.run(
        ["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge], check=True, capture_output=True, text=True, timeout=20
    ).stdout
    cookies = {int(m.group(1), 16) for m in re.finditer(r"cookie=(0x[0-9a-f]+)", out)}
    return cookies & {lane_cookie(i) for i in range(1, 5000)}


DESKTOP_MAC, DESKTOP_PORT = "02:00:00:01:00:10", 1  # campus.yaml: desktop 10.1.0.10 on s1:1


def tcp_packet(src_mac: str, src: str, dst: str, dport: int, sport: int = 40000) -> str:
    """An Ethernet/IPv4/TCP SYN as hex, for ``ovs-ofctl packet-out`` (checksums left zero: the
    flow table matches headers only)."""

    def ip4(addr: str) -> bytes:
        return bytes(int(part) for part in addr.split("."))

    tcp = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x02, 65535, 0, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0, 64, 6, 0, ip4(src), ip4(dst))
    eth = bytes.fromhex("02000000ff01" + src_mac.replace(":", "") + "0800")
    return (eth + ip + tcp).hex()


def send_lane_traffic(bridge: str, dport: int, count: int) -> None:
    """``count`` packets of a desktop -> cloud lane through the access switch's flow table, as if
    they arrived from the desktop (packet-out, action table): its forward flow's n_packets grows."""
    packet = tcp_packet(DESKTOP_MAC, "10.1.0.10", "203.0.113.10", dport)
    for _ in range(count):
        subprocess.run(
            [
                "ovs-ofctl",
                "-O",
                "OpenFlow13",
                "packet-out",
                bridge,
                f"in_port={DESKTOP_PORT} packet={packet} actions=table",
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=20,
        )


class Proc:
    def __init__(self, name: str, args: list[str], log: Path) -> None:
        self.name, self.log = name, log
        self.of_port = 0
        self.metrics_port = 0
        with open(log, "ab") as out:
            self.proc = subprocess.Popen([*VIPLANES, *args], stdout=out, stderr=out)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)  # a paused process could not act on SIGTERM
            stop_process(self.proc, 10)


def print_log_tails(procs: list[Proc], lines: int = 60) -> None:
    """After a failed test: the end of every process's log, in the report's captured output."""
    for p in procs:
        try:
            tail = p.log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            continue
        print(f"----- {p.name} ({p.log}), last {len(tail)} lines -----", *tail, sep="\n")


@contextmanager
def scaleout_cluster(pg_cluster: Any, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[dict]:
    """Two cluster controllers, an API server with two workers and four bridges on one PostgreSQL database."""
    db = pg_cluster.new_database()
    op = bootstrap(db)
    security = lab_security_args()
    procs: list[Proc] = []
    bridges = [f"{PREFIX}-s{n}" for n in (1, 2, 3, 4)]

    def controller(name: str, port: int | None = None) -> Proc:
        port, metrics = port or free_port(), free_port()
        p = Proc(
            name,
            [
                *("controller", "cluster", "--db", db, "--openflow", f"127.0.0.1:{port}", "--tick", "0.2"),
                *("--metrics", f"127.0.0.1:{metrics}", *security),
            ],
            tmp_path / f"{name}.log",
        )
        p.of_port, p.metrics_port = port, metrics
        procs.append(p)
        return p

    api_port = free_port()
    try:
        ctl = [controller("ctl-a"), controller("ctl-b")]
        for c in ctl:  # both listening before the switches try (OVS backs off after a refusal)
            # 90 s: two controllers starting at once at load 9 missed 30 s (the baseline of issue 43)
            assert wait_for(lambda c=c: "OpenFlow listening" in c.log.read_text(errors="replace"), 90), (
                f"{c.name} not listening on {c.of_port}:\n{c.log.read_text(errors='replace')[-2000:]}"
            )
        targets = [f"ssl:127.0.0.1:{c.of_port}" for c in ctl]
        for n, br in enumerate(bridges, start=1):
            add_bridge(br, n, *targets)
        api = Proc(
            "api", ["api", "--db", db, "--listen", f"127.0.0.1:{api_port}", "--workers", "2"], tmp_path / "api.log"
        )
        procs.append(api)
        url = f"http://127.0.0.1:{api_port}"
        wait_healthy(api.proc, url, api.log, timeout=90)
        yield {
            "db": db,
            "url": url,
            "op": op,
            "ctl": ctl,
            "api": api,
            "bridges": bridges,
            "controller": controller,
            "logs": tmp_path,
            "pg": pg_cluster,
        }
    finally:
        if getattr(request.node, "failed_call", False):
            print_log_tails(procs)
        for br in bridges:
            subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", br], capture_output=True, timeout=20)
        for p in procs:
            p.stop()


def db_rows(db: str, sql: str, args: tuple = ()) -> list[tuple]:
    import psycopg2

    conn = psycopg2.connect(db)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())
    finally:
        conn.close()


def lease_holder_pid(db: str) -> int | None:
    rows = db_rows(
        db,
        "SELECT holder FROM controller_lease WHERE name = 'controller' "
        "AND expires_at > extract(epoch from clock_timestamp())",
    )
    return int(rows[0][0].split(":")[1]) if rows and rows[0][0] else None


def request_active(url: str, h: dict, port: int, within_s: float) -> dict:
    """POST a lane, retrying 503 (no master / switches not ready) until it is active."""
    deadline = time.monotonic() + within_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            r = requests.post(f"{url}/api/v1/lanes", json=lane_body(port), headers=h, timeout=15)
        except requests.ConnectionError as exc:
            last = str(exc)
            time.sleep(0.1)
            continue
        last = r.json()
        if r.status_code in (200, 201) and last["state"] == "active":
            return last
        if r.status_code in (200, 201) and last["state"] == "installing":  # waiting for the master
            while time.monotonic() < deadline:
                got = requests.get(f"{url}/api/v1/lanes/{last['id']}", headers=h, timeout=5).json()
                if got["state"] != "installing":
                    assert got["state"] == "active", got
                    return got
                time.sleep(0.05)
        assert r.status_code == 503, (r.status_code, last.get("state"), last.get("reason"), last)
        time.sleep(0.1)
    raise AssertionError(f"no active lane within {within_s} s: {last}")


def api_workers(parent: int) -> list[int]:
    out = subprocess.run(["ps", "--ppid", str(parent), "-o", "pid="], capture_output=True, text=True, timeout=10).stdout
    return [int(pid) for pid in out.split()]


def controller_roles(bridge: str) -> dict[str, str]:
    """target -> role as the switches see them (every bridge's controllers, keyed by target)."""
    out = vsctl("--columns=target,role", "--format=csv", "--no-headings", "list", "controller")
    roles = {}
    for line in out.splitlines():
        target, role = [part.strip('"') for part in line.split(",")]
        roles[target] = role
    return roles


def bridge_roles(bridge: str) -> list[str]:
    """The roles of this bridge's own controllers (``master``/``slave``/``other``)."""
    out = vsctl(
        "--columns=role",
        "--format=csv",
        "--no-headings",
        "list",
        "controller",
        *vsctl("get", "bridge", bridge, "controller").strip("[]\n").replace(",", "").split(),
    )
    return [line.strip('"') for line in out.split()]
