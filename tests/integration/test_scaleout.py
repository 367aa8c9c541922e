"""The split deployment on real parts (issue 12): PostgreSQL, two `viplanes controller cluster`
processes, one `viplanes api --workers 2`, four userspace OVS bridges each connected over TLS to
both controllers (``set-controller BR ssl:A ssl:B``).

Lanes requested through the API become active with flows on the bridges; kill -9 of the master
hands the lease and the MASTER role to the other within seconds (measured), the lanes stay and
their flows are neither deleted nor re-added (same cookies, durations kept growing), and a new
lane request succeeds after the failover. A master paused past its lease (SIGSTOP) and resumed
finds itself SLAVE on every switch (the switch's own view, ``ovs-vsctl list controller``). kill -9 of
one API worker: the other serves, the parent starts a new one.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
import requests

from tests.integration.conftest_pg import pg_cluster  # noqa: F401  (session fixture)
from tests.integration.procs import free_port, lab_security_args, wait_healthy
from tests.integration.test_serve import bootstrap, lane_body, setup_researcher

pytestmark = [pytest.mark.integration, pytest.mark.postgres]
PREFIX = f"vlso{os.getpid() % 100000}"
VIPLANES = [sys.executable, "-m", "viplanes.cli"]


def vsctl(*args: str) -> str:
    return subprocess.run(["ovs-vsctl", "--timeout=10", *args], check=True, capture_output=True, text=True,
                          timeout=20).stdout


def lane_flows(bridge: str, lane_id: int) -> dict[str, float]:
    """match+actions -> duration (s) of the lane's flows (its cookie) on the bridge."""
    from viplanes.controller.cookies import lane_cookie

    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge], check=True,
                         capture_output=True, text=True, timeout=20).stdout
    flows = {}
    for line in out.splitlines():
        if line.split()[0] == f"cookie={lane_cookie(lane_id):#x},":
            duration = float(re.search(r"duration=([\d.]+)s", line).group(1))  # type: ignore[union-attr]
            key = re.sub(r"(duration|n_packets|n_bytes|hard_age|idle_age)=[^ ,]+,? ?", "", line)
            flows[key] = duration
    return flows


class Proc:
    def __init__(self, name: str, args: list[str], log: Path) -> None:
        self.name, self.log = name, log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen([*VIPLANES, *args], stdout=out, stderr=out)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def cluster(pg_cluster, tmp_path) -> Iterator[dict]:  # noqa: F811
    db = pg_cluster.new_database()
    op = bootstrap(db)
    security = lab_security_args()
    procs: list[Proc] = []
    bridges = [f"{PREFIX}-s{n}" for n in (1, 2, 3, 4)]

    def controller(name: str, port: int | None = None) -> Proc:
        port = port or free_port()
        p = Proc(name, ["controller", "cluster", "--db", db, "--openflow", f"127.0.0.1:{port}",
                        "--tick", "0.2", *security], tmp_path / f"{name}.log")
        p.of_port = port  # type: ignore[attr-defined]
        procs.append(p)
        return p

    api_port = free_port()
    try:
        ctl = [controller("ctl-a"), controller("ctl-b")]
        time.sleep(1.5)  # both listening before the switches try
        targets = [f"ssl:127.0.0.1:{c.of_port}" for c in ctl]  # type: ignore[attr-defined]
        for n, br in enumerate(bridges, start=1):
            vsctl("--may-exist", "add-br", br, "--", "set", "bridge", br, "datapath_type=netdev",
                  f"other-config:datapath-id={n:016x}", "fail_mode=secure", "protocols=OpenFlow13",
                  "--", "set-controller", br, *targets)
        api = Proc("api", ["api", "--db", db, "--listen", f"127.0.0.1:{api_port}", "--workers", "2"],
                   tmp_path / "api.log")
        procs.append(api)
        url = f"http://127.0.0.1:{api_port}"
        wait_healthy(api.proc, url, api.log, timeout=30)
        yield {"db": db, "url": url, "op": op, "ctl": ctl, "api": api, "bridges": bridges, "controller": controller,
               "logs": tmp_path}
    finally:
        for br in bridges:
            subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", br], capture_output=True,
                           timeout=20)
        for p in procs:
            p.stop()


def lease_holder_pid(db: str) -> int | None:
    import psycopg2

    conn = psycopg2.connect(db)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT holder FROM controller_lease WHERE name = 'controller' "
                        "AND expires_at > extract(epoch from clock_timestamp())")
            row = cur.fetchone()
    finally:
        conn.close()
    return int(row[0].split(":")[1]) if row and row[0] else None


def request_active(url: str, h: dict, port: int, within_s: float) -> dict:
    """POST a lane, retrying 503 (no master / switches not ready) until it is active."""
    deadline = time.monotonic() + within_s
    last = None
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
    out = subprocess.run(["ps", "--ppid", str(parent), "-o", "pid="], capture_output=True, text=True,
                         timeout=10).stdout
    return [int(pid) for pid in out.split()]


def controller_roles(bridge: str) -> dict[str, str]:
    out = vsctl("--columns=target,role", "--format=csv", "--no-headings", "list", "controller")
    roles = {}
    for line in out.splitlines():
        target, role = [part.strip('"') for part in line.split(",")]
        roles[target] = role
    return roles


def wait_for(cond, timeout_s: float, step_s: float = 0.05) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step_s)
    return False


def test_failover_keeps_lanes_and_the_deposed_master_cannot_write(cluster, record_property) -> None:
    url, db, bridges = cluster["url"], cluster["db"], cluster["bridges"]
    h = {"Authorization": f"Bearer {setup_researcher(url, cluster['op'], max_lanes=20)}"}
    lanes = [request_active(url, h, 9000 + i, within_s=40) for i in range(3)]
    before = {ln["id"]: lane_flows(bridges[0], ln["id"]) for ln in lanes}
    assert all(before.values()), f"lane flows missing on {bridges[0]}: {before}"

    # kill -9 the master; the standby takes the lease and the switches, a new lane is installed
    ctl = {c.proc.pid: c for c in cluster["ctl"]}
    master_pid = lease_holder_pid(db)
    assert master_pid in ctl, (master_pid, list(ctl))
    standby = next(c for pid, c in ctl.items() if pid != master_pid)
    t_kill = time.monotonic()
    os.kill(master_pid, signal.SIGKILL)
    ctl[master_pid].proc.wait(5)
    after_kill = request_active(url, h, 9100, within_s=15)
    failover_s = time.monotonic() - t_kill
    record_property("failover_s", round(failover_s, 2))
    print(f"\nfailover: kill -9 of the master -> a new lane active in {failover_s:.2f} s")
    assert lease_holder_pid(db) == standby.proc.pid
    assert failover_s < 6.0
    elapsed = time.monotonic() - t_kill
    for ln in lanes:  # same flows (match, actions, cookie), never re-added: durations kept growing
        now = lane_flows(bridges[0], ln["id"])
        assert set(now) == set(before[ln["id"]]), (ln["id"], before[ln["id"]], now)
        for key, duration in now.items():
            assert duration >= before[ln["id"]][key] + elapsed - 1.0, (key, before[ln["id"]][key], duration)
    assert lane_flows(bridges[0], after_kill["id"])

    # the killed one restarts (same address) as standby; pause the master past its lease, resume it
    spare = cluster["controller"]("ctl-c", ctl[master_pid].of_port)
    spare_target = f"ssl:127.0.0.1:{spare.of_port}"
    assert wait_for(lambda: controller_roles(bridges[0]).get(spare_target) == "slave", 20), \
        controller_roles(bridges[0])
    old_target = f"ssl:127.0.0.1:{standby.of_port}"
    os.kill(standby.proc.pid, signal.SIGSTOP)
    try:
        assert wait_for(lambda: lease_holder_pid(db) == spare.proc.pid, 10)
        assert wait_for(lambda: all(controller_roles(b).get(spare_target) == "master" for b in bridges), 10)
    finally:
        os.kill(standby.proc.pid, signal.SIGCONT)
    # the switches demoted the paused one themselves: whatever it still believes, it is SLAVE
    assert all(controller_roles(b).get(old_target) == "slave" for b in bridges)
    assert wait_for(lambda: "lost, now SLAVE" in standby.log.read_text(), 10)
    third = request_active(url, h, 9200, within_s=15)
    assert lane_flows(bridges[0], third["id"])
    for ln in lanes:
        assert set(lane_flows(bridges[0], ln["id"])) == set(before[ln["id"]])

    # kill -9 an API worker: the other serves meanwhile, the parent starts a new one
    workers = api_workers(cluster["api"].proc.pid)
    assert len(workers) == 2, workers
    os.kill(workers[0], signal.SIGKILL)
    fourth = request_active(url, h, 9300, within_s=10)
    assert wait_for(lambda: len(api_workers(cluster["api"].proc.pid)) == 2
                    and workers[0] not in api_workers(cluster["api"].proc.pid), 10)
    assert lane_flows(bridges[0], fourth["id"])
    r = requests.post(f"{url}/api/v1/lanes/{third['id']}/release", headers=h, timeout=10)
    assert r.json()["state"] == "released"
    assert wait_for(lambda: not lane_flows(bridges[0], third["id"]), 5), "released lane's flows stayed"
