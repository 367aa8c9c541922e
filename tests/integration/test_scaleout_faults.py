"""Faults of the split deployment under load (issue 12), on real parts: PostgreSQL, two
`viplanes controller cluster` processes, `viplanes api --workers 2`, four userspace OVS bridges
each connected to both controllers (``scaleout_kit.cluster``).

Several client threads request lanes with an Idempotency-Key each and retry exactly as a client
should: the same key again after a 503 (honouring Retry-After, capped) or a dropped connection;
an ``installing`` answer is followed by GET until the lane leaves it. Then one fault:

- kill -9 of the master controller while the clients request lanes;
- kill -9 of one API worker while the clients request lanes;
- PostgreSQL stopped for ~6 s and started again, with lanes carrying traffic.

What every test asserts afterwards, from the database and the switches themselves: each accepted
lane (every 200/201 answer) is one row, ``active``, and its flows are on the switches by cookie;
no key made two rows; the switches carry no lane cookie without an active row; failures were 503
with Retry-After (or a cut connection where a process died) and only inside the fault's window,
never 500; the lanes that existed before the fault kept their flows (same match/actions, durations
kept growing, packet counters kept). See docs/faults.md for run times.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from tests.support.procs import wait_for
from tests.support.scaleout_kit import (
    FlowStat,
    api_workers,
    bridge_roles,
    db_rows,
    lane_cookies,
    lane_flow_stats,
    lease_holder_pid,
    request_active,
    send_lane_traffic,
)
from tests.support.serve import lane_body, setup_researcher
from viplanes.controller.compile.cookies import lane_cookie

pytestmark = [pytest.mark.integration, pytest.mark.postgres]
LANE_BRIDGES = 3  # s1 -> s2 -> s3: every test lane (desktop -> cloud) has flows on these


@dataclass
class Load:
    """Client threads requesting lanes until ``stop``; what they saw, with monotonic times."""

    url: str
    headers: dict
    threads: int = 3  # at most 4
    pause_s: float = 0.3
    stop: threading.Event = field(default_factory=threading.Event)
    # (sent, status, Retry-After) of every answer; (cut, exception name, key) of a dropped connection
    answers: list[tuple[float, Any, str]] = field(default_factory=list)
    spans: list[tuple[float, float]] = field(default_factory=list)  # (sent, answered) of every POST
    accepted: dict[str, dict] = field(default_factory=dict)  # key -> the lane as finally read
    problems: list[str] = field(default_factory=list)

    def start(self) -> list[threading.Thread]:
        workers = [threading.Thread(target=self._client, args=(n,), daemon=True) for n in range(self.threads)]
        for w in workers:
            w.start()
        return workers

    def in_flight_at(self, t: float) -> int:
        """POSTs sent before ``t`` and answered (or cut) after it."""
        return sum(1 for sent, done in self.spans if sent < t < done)

    def overlapping(self, a: float, b: float) -> int:
        """POSTs in flight at some moment between ``a`` and ``b``."""
        return sum(1 for sent, done in self.spans if sent < b and done > a)

    def slowest_from(self, t: float) -> float:
        return max((done - sent for sent, done in self.spans if done > t), default=0.0)

    def successes_after(self, t: float) -> int:
        return sum(1 for at, status, _ in self.answers if at > t and status in (200, 201))

    def _client(self, n: int) -> None:
        for j in range(70):  # ports 9000-9279 (4 threads); the tests' own lanes use 9280-9299
            if self.stop.is_set():
                return
            port = 9000 + 70 * n + j
            self._one(f"load-{n}-{j}", port)
            time.sleep(self.pause_s)

    def _one(self, key: str, port: int) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            t = time.monotonic()
            try:
                r = requests.post(
                    f"{self.url}/api/v1/lanes",
                    json=lane_body(port),
                    timeout=20,
                    headers={**self.headers, "Idempotency-Key": key},
                )
            except requests.RequestException as exc:
                self.answers.append((time.monotonic(), type(exc).__name__, key))  # when it was cut
                self.spans.append((t, time.monotonic()))
                time.sleep(0.1)
                continue
            self.answers.append((t, r.status_code, r.headers.get("Retry-After", "")))
            self.spans.append((t, time.monotonic()))
            if r.status_code == 503:
                if not r.headers.get("Retry-After"):
                    self.problems.append(f"503 without Retry-After: {r.text[:200]}")
                time.sleep(min(float(r.headers.get("Retry-After") or 1), 0.3))
                continue
            if r.status_code not in (200, 201):
                self.problems.append(f"{key}: {r.status_code} {r.text[:300]}")
                return
            lane = r.json()
            self.accepted[key] = lane
            while lane["state"] == "installing" and time.monotonic() < deadline:  # the master picks it up
                time.sleep(0.1)
                try:
                    lane = requests.get(
                        f"{self.url}/api/v1/lanes/{lane['id']}", headers=self.headers, timeout=10
                    ).json()
                except requests.RequestException:
                    continue
            self.accepted[key] = lane
            return
        self.problems.append(f"{key}: no answer within 30 s")


def check_no_lane_lost_or_duplicated(db: str, bridges: list[str], load: Load) -> set[int]:
    """Every accepted lane is one active row with flows; no key made two rows; no stray flows."""
    assert not load.problems, load.problems
    assert load.accepted, "the clients got no lane at all"
    bad = {k: (v["id"], v["state"], v.get("reason")) for k, v in load.accepted.items() if v["state"] != "active"}
    assert not bad, f"accepted lanes not active: {bad}"
    rows = db_rows(db, "SELECT idempotency_key, id, state FROM lanes WHERE idempotency_key LIKE 'load-%%'")
    by_key: dict[str, list[tuple[int, str]]] = {}
    for key, lane_id, state in rows:
        by_key.setdefault(key, []).append((lane_id, state))
    duplicated = {k: v for k, v in by_key.items() if len(v) != 1}
    assert not duplicated, f"one key, several rows: {duplicated}"
    for key, lane in load.accepted.items():
        assert by_key.get(key) == [(lane["id"], "active")], (key, lane["id"], by_key.get(key))
    # a key whose answer never reached its client (the client gave up) is not accepted; none should be
    assert set(by_key) == set(load.accepted), set(by_key) ^ set(load.accepted)
    active = {lane_id for (lane_id,) in db_rows(db, "SELECT id FROM lanes WHERE state = 'active'")}
    want = {lane_cookie(i) for i in active}
    for br in bridges[:LANE_BRIDGES]:
        have = lane_cookies(br)
        assert have == want, (br, "missing", sorted(want - have), "stray", sorted(have - want))
    return active


def failures(load: Load) -> list[tuple[float, Any, str]]:
    return [a for a in load.answers if a[1] not in (200, 201)]


def traffic_lanes(url: str, h: dict, bridge: str, count: int) -> tuple[list[dict], dict[int, dict[str, FlowStat]]]:
    """``count`` active lanes with 5 packets each through their first flow on ``bridge``."""
    lanes = [request_active(url, h, 9290 + i, within_s=40) for i in range(count)]
    for lane in lanes:
        send_lane_traffic(bridge, lane["dst_port"], 5)
    stats = {lane["id"]: lane_flow_stats(bridge, lane["id"]) for lane in lanes}
    for lane_id, flows in stats.items():
        assert flows and max(s.n_packets for s in flows.values()) >= 5, (lane_id, flows)
    return lanes, stats


def check_flows_untouched(bridge: str, before: dict[int, dict[str, FlowStat]], since: float) -> None:
    """Same flows, durations grew by the time passed (never re-added), packet counters kept."""
    elapsed = time.monotonic() - since
    for lane_id, flows in before.items():
        now = lane_flow_stats(bridge, lane_id)
        assert set(now) == set(flows), (lane_id, flows, now)
        for key, stat in now.items():
            assert stat.duration_s >= flows[key].duration_s + elapsed - 1.0, (key, flows[key], stat)
            assert stat.n_packets >= flows[key].n_packets, (key, flows[key], stat)


def api_ready(url: str, switches: int) -> bool:
    """/readyz of an API worker: a master holds the lease and reports every switch reconciled
    (without a master it lists no switch: ``cluster/reports.py``)."""
    body = requests.get(f"{url}/readyz", timeout=5).json()
    return bool(body["ready"] and body["switches_total"] == switches and body["switches_ready"] == switches)


def lane_stats(url: str, h: dict, lane_id: int) -> dict:
    return dict(requests.get(f"{url}/api/v1/lanes/{lane_id}/stats", headers=h, timeout=5).json())


def one_master(db: str, ctl: list[Any], bridges: list[str]) -> bool:
    """The lease names a live controller and every switch has exactly one MASTER connection."""
    holder = lease_holder_pid(db)
    alive = {c.proc.pid for c in ctl if c.proc.poll() is None}
    return holder in alive and all(bridge_roles(br).count("master") == 1 for br in bridges)


def test_kill_master_while_clients_request_lanes(cluster, record_property) -> None:
    url, db, bridges = cluster["url"], cluster["db"], cluster["bridges"]
    h = {"Authorization": f"Bearer {setup_researcher(url, cluster['op'], max_lanes=250)}"}
    _, before = traffic_lanes(url, h, bridges[0], 2)
    t_before = time.monotonic()
    load = Load(url, h, threads=4, pause_s=0.15)
    clients = load.start()
    try:
        assert wait_for(lambda: load.successes_after(0) >= 3, 20), load.answers
        master = lease_holder_pid(db)
        ctl = {c.proc.pid: c for c in cluster["ctl"]}
        assert master in ctl, (master, list(ctl))
        t_kill = time.monotonic()
        os.kill(master, signal.SIGKILL)
        ctl[master].proc.wait(5)
        standby = next(pid for pid in ctl if pid != master)
        assert wait_for(lambda: lease_holder_pid(db) == standby, 10, step=0.02), "the standby took no lease"
        t_master = time.monotonic()
        # the switches' own view (ovs-vswitchd refreshes the controller table's role every few seconds)
        assert wait_for(lambda: one_master(db, cluster["ctl"], bridges), 20), "no switch-side master"
        assert wait_for(lambda: load.successes_after(t_master) >= 3, 15), load.answers[-10:]
    finally:
        load.stop.set()
        for c in clients:
            c.join(40)
    record_property("new_master_s", round(t_master - t_kill, 2))
    failed = failures(load)
    print(
        f"\nkill -9 master: the standby holds the lease {t_master - t_kill:.2f} s after it; {len(load.accepted)} lanes accepted, "
        f"{load.in_flight_at(t_kill)} POSTs in flight at the kill, {load.in_flight_at(t_kill + 1.0)} 1 s later, "
        f"{load.overlapping(t_kill, t_master + 1.0)} until 1 s after the takeover, slowest answer after it "
        f"{load.slowest_from(t_kill):.2f} s; failed answers (s after the kill, status) "
        f"{[(round(a[0] - t_kill, 2), a[1]) for a in failed]}"
    )
    # the standby takes over within ~0.1 s of a crash (the dead master's session ends: issue 44),
    # so two instants (the kill, a second later) may both fall between requests: the whole span
    assert load.overlapping(t_kill, t_master + 1.0) >= 1, "no request met the failover"
    assert all(status == 503 for _, status, _ in failed), failed  # never 500, never a cut connection
    window = (t_kill - 0.5, t_master + 3.0)  # a request sent just before the kill may meet it
    outside = [(round(at - t_kill, 2), status) for at, status, _ in failed if not window[0] <= at <= window[1]]
    assert not outside, f"failures outside the failover window {outside}"
    check_no_lane_lost_or_duplicated(db, bridges, load)
    check_flows_untouched(bridges[0], before, t_before)


def test_kill_api_worker_under_load(cluster) -> None:
    url, db, bridges = cluster["url"], cluster["db"], cluster["bridges"]
    h = {"Authorization": f"Bearer {setup_researcher(url, cluster['op'], max_lanes=250)}"}
    request_active(url, h, 9299, within_s=40)
    parent = cluster["api"].proc.pid
    workers = api_workers(parent)
    assert len(workers) == 2, workers
    load = Load(url, h, threads=4, pause_s=0.05)
    clients = load.start()
    try:
        assert wait_for(lambda: load.successes_after(0) >= 3, 20), load.answers
        t_kill = time.monotonic()
        os.kill(workers[0], signal.SIGKILL)
        # the other worker serves meanwhile (SO_REUSEPORT hands it the new connections)
        assert wait_for(lambda: load.successes_after(t_kill + 0.2) >= 3, 5), load.answers[-10:]
        assert wait_for(lambda: len(api_workers(parent)) == 2 and workers[0] not in api_workers(parent), 10), (
            f"the parent did not start a new worker: {api_workers(parent)}"
        )
        respawned = next(pid for pid in api_workers(parent) if pid not in workers)
        t_respawn = time.monotonic()
        time.sleep(1.5)  # both serve again
    finally:
        load.stop.set()
        for c in clients:
            c.join(40)
    failed = failures(load)
    print(
        f"\nkill -9 API worker: respawned as {respawned} within {t_respawn - t_kill:.2f} s; "
        f"{load.in_flight_at(t_kill)} POSTs in flight at the kill; "
        f"{len(load.accepted)} lanes accepted, failed answers {[(round(a[0] - t_kill, 2), a[1]) for a in failed]}"
    )
    # the killed worker's in-flight requests and queued connections are cut; retried with the same key
    assert not load.problems, load.problems[:5]
    assert all(a[1] not in (500, 503) and t_kill - 0.1 <= a[0] <= t_kill + 1.0 for a in failed), failed
    assert cluster["api"].proc.poll() is None
    check_no_lane_lost_or_duplicated(db, bridges, load)


def test_postgres_restart_keeps_lanes_and_one_master(cluster, record_property) -> None:
    url, db, bridges, ctl = cluster["url"], cluster["db"], cluster["bridges"], cluster["ctl"]
    h = {"Authorization": f"Bearer {setup_researcher(url, cluster['op'], max_lanes=250)}"}
    lanes, before = traffic_lanes(url, h, bridges[0], 3)
    # split-mode observability: an API worker knows the master, its switches and the lane counters
    assert wait_for(lambda: api_ready(url, 4), 10), requests.get(f"{url}/readyz", timeout=5).json()
    assert wait_for(lambda: (lane_stats(url, h, lanes[0]["id"]).get("packets") or 0) >= 5, 8), lane_stats(
        url, h, lanes[0]["id"]
    )
    stats = lane_stats(url, h, lanes[0]["id"])
    assert stats["available"] and 0 <= stats["age_s"] <= 6.0, stats
    cookies_before = [lane_cookies(br) for br in bridges[:LANE_BRIDGES]]
    parent = cluster["api"].proc.pid
    workers = sorted(api_workers(parent))
    t_before = time.monotonic()
    cluster["pg"].stop_server()
    t_stop = time.monotonic()
    try:
        time.sleep(1.0)
        # the API answers 503 + Retry-After while the database is away, never 500
        r = requests.post(f"{url}/api/v1/lanes", json=lane_body(9280), headers=h, timeout=20)
        assert r.status_code == 503 and r.headers.get("Retry-After"), (r.status_code, r.text[:300])
        # the master cannot renew: it steps down at its lease's end, and no switch has a master
        assert wait_for(lambda: all(bridge_roles(br).count("master") == 0 for br in bridges), 8), [
            bridge_roles(br) for br in bridges
        ]
        time.sleep(max(0.0, 6.0 - (time.monotonic() - t_stop)))
    finally:
        cluster["pg"].start_server()
    t_start = time.monotonic()
    assert wait_for(lambda: lease_holder_pid(db) in {c.proc.pid for c in ctl}, 20, step=0.02)
    t_lease = time.monotonic()
    fresh = request_active(url, h, 9281, within_s=20)  # lanes can be requested again
    t_lane = time.monotonic()
    assert wait_for(lambda: one_master(db, ctl, bridges), 20), (
        lease_holder_pid(db),
        [bridge_roles(br) for br in bridges],
    )
    t_master = time.monotonic()
    assert wait_for(lambda: api_ready(url, 4), 10), requests.get(f"{url}/readyz", timeout=5).json()
    record_property("lane_after_pg_start_s", round(t_lane - t_start, 2))
    print(
        f"\nPostgreSQL down {t_start - t_stop:.1f} s: a controller holds the lease {t_lease - t_start:.2f} s "
        f"after its start, a new lane active after {t_lane - t_start:.2f} s, the switches' controller "
        f"table shows one MASTER each after {t_master - t_start:.2f} s"
    )
    # nothing was deleted or re-added: same flows, durations kept growing, packet counters kept
    check_flows_untouched(bridges[0], before, t_before)
    assert [lane_cookies(br) - {lane_cookie(fresh['id'])} for br in bridges[:LANE_BRIDGES]] == cookies_before
    for lane in lanes:  # and they still carry packets
        send_lane_traffic(bridges[0], lane["dst_port"], 2)
    again = lane_flow_stats(bridges[0], lanes[0]["id"])
    assert max(s.n_packets for s in again.values()) >= 7, again
    assert cookies_before[0] < lane_cookies(bridges[0]) and lane_flow_stats(bridges[0], fresh["id"])
    # by design nobody exits on a database outage: same controller processes, same API workers
    assert all(c.proc.poll() is None for c in ctl), [c.proc.poll() for c in ctl]
    assert cluster["api"].proc.poll() is None and sorted(api_workers(parent)) == workers
    state = dict(db_rows(db, "SELECT id, state FROM lanes"))
    assert all(state[lane["id"]] == "active" for lane in lanes), state
