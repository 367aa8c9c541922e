"""Benchmark "peers": our API against the os-ken REST app ``ofctl_rest`` and Faucet 1.10, one lane each.

Every system drives the same three userspace bridges (s1, s2, s3 of the campus; s4 is attached
too but carries nothing) with one lane's rules per sample: our API a ``POST /api/v1/lanes``, ofctl_rest
one ``POST /stats/flowentry/add`` per flow (its API takes one flow per request), Faucet a
config write + SIGHUP. "Visible" is the same clock for all: :class:`bench.harness.flowwatch.FlowWatch`
sees the last of the lane's flows added on the last bridge (release: deleted). The floor
(:mod:`bench.harness.floor`: compiled messages and barriers, no HTTP) is measured like-for-like for the
ratios: over the run's OpenFlow transport (TLS unless ``BENCH_OPENFLOW=tcp``) and on the same
clock, send -> visible (release: send -> gone) through the same FlowWatch; its barrier clock and
the old floor (plain TCP, send -> barriers) are printed below it so the change of floor is visible.
The ratios' floor is taken in two halves, right before and right after our SQLite run, and pooled;
each half's p50 is printed beside it. The floor's release deletes everything its add installed,
as ours and ofctl_rest's do: the lane's flows and the shared flows of its address, with the lane
address's conntrack zone flushed (``bench.harness.floor.full_removal``).

Our API runs on a database with a campus's history (``HISTORY`` ended lanes; PostgreSQL analyzed,
as autovacuum keeps it: ``bench.harness.history``), not on one created seconds before.

The peers live in venvs under bench/ (:mod:`bench.harness.peer_env`): Faucet 1.10.12 with os-ken 3.1.0,
and os-ken 1.4.1 for ``ofctl_rest`` (os-ken 3.x no longer ships it); a peer that cannot be installed or
started is printed as ``peer not installable: <reason>`` and left out of the table with that note.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness.campus import Campus, campus
from bench.harness.flowwatch import FlowWatch, cookie_marker, port_marker
from bench.harness.history import seed as seed_history
from bench.harness.ovs import ports_by_switch
from bench.harness.peer_env import (
    REST_LAUNCHER,
    PeerProcess,
    PeerUnavailable,
    check_importable,
    ensure_rest_venv,
    ensure_venv,
    osken_manager_args,
    versions,
    wait_http,
)
from bench.harness.peer_rules import faucet_acls, faucet_config, ofctl_rest_bodies, ofctl_rest_delete_bodies
from bench.harness.pg import database
from bench.harness.report import Result
from bench.harness.server import Api, bench_serve, free_port, researcher
from bench.harness.stats import ratio, summarize_ms
from bench.harness.table_format import markdown_rows
from bench.harness.workload import Flow, flows, grant_body, lane_body
from bench.suite.activation import SRC, run_floor
from bench.suite.peer_samples import (
    Samples as Samples,
)
from bench.suite.peer_samples import (
    _timed_loop as _timed_loop,
)
from bench.suite.peer_samples import (
    clear_flows as clear_flows,
)
from bench.suite.peer_samples import (
    flow_counts as flow_counts,
)
from bench.suite.peer_samples import (
    lane_messages as lane_messages,
)
from bench.suite.peer_samples import (
    pooled as pooled,
)
from bench.suite.peer_samples import (
    watched_floor as watched_floor,
)

WAIT_S = 10.0  # a sample whose flows are not all seen by then is a failure
HISTORY = 5000  # ended lanes in our database before the samples: ~55 a day over 90 days' retention
REST_PEER = "os-ken 1.4.1 ofctl_rest"


def measure_ours(c: Campus, watch: FlowWatch, n: int, warmup: int, db: str, history: int = 0) -> Samples:
    """Our API's samples; ``history``: that many ended lanes in the database first (``bench.harness.history``)."""
    workdir = c.workdir / f"ours-{db}"
    workdir.mkdir()
    with database(db, workdir) as db_url:
        serve = bench_serve(workdir, free_port(), db_url=db_url).start()
        try:
            c.attach(serve)
            token, _ = researcher(
                serve, serve.add_operator(), "alice", [grant_body("alice", c.host_ip(SRC), max_lanes=20)]
            )
            api = Api(serve.api_port, token)
            if history:  # one lane of the system's own to copy, then the campus's past
                first = api.ok("POST", "/api/v1/lanes", lane_body(c.host_ip(SRC), next(flows(1, offset=500))))
                api.ok("POST", f"/api/v1/lanes/{first['id']}/release")
                seeded = seed_history(db_url, history, first["id"])
                print(f"viplanes API ({db}): {seeded} ended lanes in the database", file=sys.stderr, flush=True)
            counts = flow_counts(lane_messages(c, 1, next(flows(1))))
            from viplanes.controller.compile.cookies import lane_cookie

            def one(i: int, flow: Flow) -> tuple[float, float, float] | str:
                t0 = time.perf_counter()
                status, lane = api.call("POST", "/api/v1/lanes", lane_body(c.host_ip(SRC), flow))
                t_answer = time.perf_counter()
                if status != 201 or lane.get("state") != "active":
                    return f"{status}: {lane}"[:200]
                marker = cookie_marker(lane_cookie(lane["id"]))
                t_vis = watch.wait("ADDED", marker, counts, t0, WAIT_S)
                t1 = time.perf_counter()
                api.ok("POST", f"/api/v1/lanes/{lane['id']}/release")
                t_gone = watch.wait("DELETED", marker, counts, t1, WAIT_S)
                if t_vis is None or t_gone is None:
                    return f"lane {lane['id']}: flows not seen (added {t_vis}, deleted {t_gone})"
                return t_vis - t0, t_gone - t1, t_answer - t0

            try:
                return _timed_loop(n, warmup, one, watch)
            finally:
                api.close()
        finally:
            serve.stop()
            c.bridges.disconnect()


class _Http:
    """Keep-alive JSON POSTs to a peer's REST API."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def post(self, path: str, body: Any) -> int:
        self.conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        resp.read()
        return resp.status

    def get(self, path: str) -> Any:
        self.conn.request("GET", path)
        resp = self.conn.getresponse()
        return json.loads(resp.read() or b"null")


def measure_ofctl_rest(c: Campus, watch: FlowWatch, n: int, warmup: int, py: Path) -> Samples:
    check_importable(py, "ofctl_rest")
    of_port, ws_port = free_port(), free_port()
    proc = PeerProcess(
        [
            *osken_manager_args(py, of_port, REST_LAUNCHER),
            "--wsapi-host",
            "127.0.0.1",
            "--wsapi-port",
            str(ws_port),
            "os_ken.app.ofctl_rest",
        ],
        c.workdir / "ofctl_rest.log",
    ).start()
    try:
        wait_http(ws_port, "/stats/switches", 60.0, proc)
        c.bridges.connect(of_port)
        c.wait_connected()
        http_ = _Http(ws_port)
        dpids = set(c.bridges.names)
        if not dpids <= set(http_.get("/stats/switches") or []):
            raise PeerUnavailable(f"switches not seen by ofctl_rest: {http_.get('/stats/switches')}")
        from viplanes.controller.compile.cookies import lane_cookie

        def one(i: int, flow: Flow) -> tuple[float, float, float] | str:
            cookie = lane_cookie(700_000 + i)
            bodies = ofctl_rest_bodies(lane_messages(c, 700_000 + i, flow), cookie)
            counts = {d: len(b) for d, b in bodies.items()}
            marker = cookie_marker(cookie)
            t0 = time.perf_counter()
            statuses = [http_.post("/stats/flowentry/add", b) for bs in bodies.values() for b in bs]
            t_answer = time.perf_counter()
            if any(s != 200 for s in statuses):
                return f"flowentry/add answered {statuses}"
            t_vis = watch.wait("ADDED", marker, counts, t0, WAIT_S)
            t1 = time.perf_counter()
            for b in ofctl_rest_delete_bodies(sorted(bodies), cookie):
                http_.post("/stats/flowentry/delete", b)
            t_gone = watch.wait("DELETED", marker, counts, t1, WAIT_S)
            if t_vis is None or t_gone is None:
                return f"cookie {cookie:#x}: flows not seen (added {t_vis}, deleted {t_gone}): {proc.tail(300)}"
            return t_vis - t0, t_gone - t1, t_answer - t0

        return _timed_loop(n, warmup, one, watch)
    finally:
        proc.stop()
        c.bridges.disconnect()


def measure_faucet(c: Campus, watch: FlowWatch, n: int, warmup: int, py: Path) -> Samples:
    check_importable(py, "faucet")
    ports = {sw.dpid: ports_by_switch(c.topo)[sw.name] for sw in c.topo.switches}
    config = c.workdir / "faucet.yaml"

    def write(acls: dict) -> None:
        tmp = config.with_suffix(".tmp")
        tmp.write_text(faucet_config(ports, acls))
        os.replace(tmp, config)

    write({})
    of_port = free_port()
    env = {
        "FAUCET_CONFIG": str(config),
        "FAUCET_LOG": str(c.workdir / "faucet.log"),
        "FAUCET_EXCEPTION_LOG": str(c.workdir / "faucet-exception.log"),
        "FAUCET_CONFIG_STAT_RELOAD": "0",
        "FAUCET_PROMETHEUS_ADDR": "127.0.0.1",
        "FAUCET_PROMETHEUS_PORT": str(free_port()),
    }
    proc = PeerProcess(
        [*osken_manager_args(py, of_port), "faucet.faucet"], c.workdir / "faucet-stdout.log", env
    ).start()
    try:
        wait_http(int(env["FAUCET_PROMETHEUS_PORT"]), "/", 60.0, proc)
        c.bridges.connect(of_port)
        c.wait_connected(settle_s=3.0)  # Faucet wipes and installs its pipeline on connect

        def one(i: int, flow: Flow) -> tuple[float, float, float] | str:
            acls = faucet_acls(lane_messages(c, 800_000 + i, flow), f"lane{i}", flow.dst_port)
            counts: dict[int, int] = {}
            for (dpid, _), (_, rules) in acls.items():
                counts[dpid] = counts.get(dpid, 0) + len(rules)
            marker = port_marker(flow.dst_port)
            t0 = time.perf_counter()
            write(acls)
            proc.signal(signal.SIGHUP)
            t_answer = time.perf_counter()
            t_vis = watch.wait("ADDED", marker, counts, t0, WAIT_S)
            t1 = time.perf_counter()
            write({})
            proc.signal(signal.SIGHUP)
            t_gone = watch.wait("DELETED", marker, counts, t1, WAIT_S)
            if t_vis is None or t_gone is None:
                return (
                    f"port {flow.dst_port}: flows not seen (added {t_vis}, deleted {t_gone}): "
                    f"{(c.workdir / 'faucet.log').read_text(errors='replace')[-400:]}"
                )
            return t_vis - t0, t_gone - t1, t_answer - t0

        return _timed_loop(n, warmup, one, watch)
    finally:
        proc.stop()
        c.bridges.disconnect()


def run(quick: bool = False, db: str = "sqlite", **_: Any) -> Result:
    n = 20 if quick else 100
    warmup = 3 if quick else 5
    res = Result("peers")
    load_start = os.getloadavg()
    systems: dict[str, dict[str, Any]] = {}
    unavailable: dict[str, str] = {}  # peer -> why it cannot be installed or started
    not_measured: dict[str, str] = {}  # our own runs that failed (e.g. no PostgreSQL here)
    peer_versions: dict[str, dict[str, str]] = {}
    with campus("peers") as c:
        old_floor = run_floor(c, n, transport="tcp")  # the floor before: plain TCP, barrier clock
        lane_dpids = sorted(lane_messages(c, 1, next(flows(1))))
        with FlowWatch({d: c.bridges.names[d] for d in lane_dpids}) as watch:
            halves = [watched_floor(c, n // 2, watch)]  # like-for-like: the run's transport, visible
            for store in dict.fromkeys(["sqlite", db, "postgresql"]):
                clear_flows(c)
                try:
                    systems[f"viplanes API ({store})"] = measure_ours(c, watch, n, warmup, store, HISTORY).to_dict()
                except Exception as exc:
                    not_measured[f"viplanes API ({store})"] = f"{exc.__class__.__name__}: {exc}"[:300]
                if store == "sqlite":  # the floor's second half, right after ours
                    halves.append(watched_floor(c, n - n // 2, watch))
            floor = pooled(halves)
            for name, measure, ensure in (
                (REST_PEER, measure_ofctl_rest, ensure_rest_venv),
                ("Faucet", measure_faucet, ensure_venv),
            ):
                try:
                    py = ensure()
                    peer_versions[name] = versions(py)
                except PeerUnavailable as exc:
                    unavailable[name] = str(exc)
                    continue
                clear_flows(c)
                try:
                    systems[name] = measure(c, watch, n, warmup, py).to_dict()
                except PeerUnavailable as exc:
                    unavailable[name] = str(exc)
    for name, reason in unavailable.items():
        print(f"peer not installable: {name}: {reason}", file=sys.stderr, flush=True)
    for name, reason in not_measured.items():
        print(f"not measured: {name}: {reason}", file=sys.stderr, flush=True)
    floor_sum = summarize_ms(floor["visible_s"])  # the ratios' floor: the peers' clock
    floor_rel = summarize_ms(floor["gone_s"])
    floor_barrier = summarize_ms(floor["latency_s"])
    floor_barrier_rel = summarize_ms(floor["removal_s"])
    old_sum = summarize_ms(old_floor["latency_s"])
    old_rel = summarize_ms(old_floor["removal_s"])
    transport = floor["transport"]
    ours = systems.get("viplanes API (sqlite)") or {}
    for name, s in systems.items():
        act, rel = s.get("activation"), s.get("release")
        if not act:
            res.add(f"{name}", None, "", note=f"no sample: {s['failures'][:1]}")
            continue
        res.add(
            f"{name} activation p50",
            act["p50_ms"],
            "ms",
            note=f"p95 {act['p95_ms']:.1f}, p99 {act['p99_ms']:.1f}; "
            f"x{ratio(act['p50_ms'], floor_sum.p50_ms) or 0:.1f} floor"
            + (
                f", x{ratio(act['p50_ms'], ours['activation']['p50_ms']) or 0:.2f} ours"
                if ours.get("activation")
                else ""
            ),
        )
        if rel:
            res.add(
                f"{name} release p50",
                rel["p50_ms"],
                "ms",
                note=f"p95 {rel['p95_ms']:.1f}, p99 {rel['p99_ms']:.1f}; "
                f"x{ratio(rel['p50_ms'], floor_rel.p50_ms) or 0:.1f} floor",
            )
    half_p50 = [(summarize_ms(h["visible_s"]).p50_ms, summarize_ms(h["gone_s"]).p50_ms) for h in halves]
    res.add(
        f"floor p50 ({transport}, send -> visible)",
        floor_sum.p50_ms,
        "ms",
        note=f"p99 {floor_sum.p99_ms:.1f}; the ratios' floor; before / after ours "
        f"{half_p50[0][0]:.2f} / {half_p50[1][0]:.2f}",
    )
    res.add(
        f"floor release p50 ({transport}, send -> gone)",
        floor_rel.p50_ms,
        "ms",
        note=f"p99 {floor_rel.p99_ms:.1f}; before / after ours {half_p50[0][1]:.2f} / {half_p50[1][1]:.2f}",
    )
    res.add(
        f"floor p50 ({transport}, send -> barriers)",
        floor_barrier.p50_ms,
        "ms",
        note=f"release {floor_barrier_rel.p50_ms:.2f}",
    )
    res.add(
        "old floor p50 (tcp, send -> barriers)",
        old_sum.p50_ms,
        "ms",
        note=f"p99 {old_sum.p99_ms:.1f}; release {old_rel.p50_ms:.2f}",
    )
    for name, reason in unavailable.items():
        res.add(f"{name}: not installable", None, "", note=reason[:120])
    for name, reason in not_measured.items():
        res.add(f"{name}: not measured", None, "", note=reason[:120])
    res.details = {
        "loadavg_start": load_start,
        "lanes": n,
        "warmup": warmup,
        "systems": systems,
        "unavailable": unavailable,
        "not_measured": not_measured,
        "peer_versions": peer_versions,
        "floor": floor_sum.as_dict(),
        "floor_release": floor_rel.as_dict(),
        "floor_barrier": floor_barrier.as_dict(),
        "floor_barrier_release": floor_barrier_rel.as_dict(),
        "floor_watch_missed": floor["watch_missed"][:10],
        "floor_halves_p50_ms": [{"visible": a, "gone": b} for a, b in half_p50],
        "old_floor_tcp_barrier": old_sum.as_dict(),
        "old_floor_tcp_barrier_release": old_rel.as_dict(),
        "openflow": os.environ.get("BENCH_OPENFLOW", "ssl"),
        "visible_by": "ovs-ofctl monitor BR watch: (one per bridge, long-lived)",
        "table": markdown_rows(
            systems,
            floor_sum.as_dict(),
            floor_rel.as_dict(),
            floor_label=f"floor ({transport}, watched)",
            floor_clock=("send -> visible", "send -> gone"),
            other_floors=(
                (f"floor ({transport}, watched)", "activation: send -> barriers", floor_barrier.as_dict()),
                (f"floor ({transport}, watched)", "release: send -> barriers", floor_barrier_rel.as_dict()),
                ("old floor (tcp)", "activation: send -> barriers", old_sum.as_dict()),
                ("old floor (tcp)", "release: send -> barriers", old_rel.as_dict()),
            ),
        ),
    }
    print("\n".join(res.details["table"]), file=sys.stderr, flush=True)
    return res
