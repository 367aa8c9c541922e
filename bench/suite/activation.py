"""Benchmark 1: POST /api/v1/lanes -> lane active, 200 lanes one after another, vs the floor.

API side: a real ``viplanes serve`` (embedded os-ken controller, SQLite), a researcher token, one
keep-alive HTTP connection; each lane is requested, timed until the answer says ``active`` (the
API answers an immediate lane only after every barrier), then released. Floor: the same compiled
messages sent by :mod:`bench.harness.floor_app` to the same bridges, one barrier per switch in parallel.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness.campus import Campus, campus
from bench.harness.floor import SYNC
from bench.harness.flowwatch import FlowWatch, cookie_marker
from bench.harness.ovs import openflow_scheme
from bench.harness.pg import database
from bench.harness.report import Result, Target
from bench.harness.server import REPO, Api, bench_serve, free_port, researcher
from bench.harness.stats import ratio, summarize_ms
from bench.harness.workload import flows, grant_body, lane_body

SRC = "desktop"  # three switches, NAT'd: the longest lane on the campus
WATCH_S = 10.0  # a watched floor sample whose flows are not all seen by then is a miss


def run_floor(
    c: Campus,
    n: int,
    warmup: int = 10,
    batched: bool = False,
    bundle: bool = False,
    transport: str | None = None,
    watch: FlowWatch | None = None,
) -> dict[str, Any]:
    """bench.harness.floor on the campus's bridges. ``transport``: tcp/ssl (default: the run's, see
    bench.harness.ovs.openflow_scheme). With ``watch``: also timed send -> visible / gone on the peers'
    clock (``visible_s``, ``gone_s``), the barrier clock kept beside it."""
    cmd = [
        sys.executable,
        "-m",
        "bench.harness.floor",
        "--port",
        str(free_port()),
        "--n",
        str(n),
        "--warmup",
        str(warmup),
        "--src",
        SRC,
        "--bridges",
        ",".join(c.bridges.names.values()),
        "--transport",
        transport or openflow_scheme(),
    ]
    if batched:
        cmd.append("--batched")
    if bundle:
        cmd.append("--bundle")
    if watch is not None:
        return _watched_floor(cmd + ["--watched"], watch, warmup, c.workdir / "floor-watched.log")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"floor failed ({out.returncode}): {out.stderr[-1500:]}")
    return json.loads(lines[-1])


def _watched_floor(cmd: list[str], watch: FlowWatch, warmup: int, log: Path) -> dict[str, Any]:
    """Run a ``--watched`` floor: answer each SYNC line once ``watch`` has seen the flows."""
    visible_s: list[float] = []
    gone_s: list[float] = []
    missed: list[str] = []
    lines: list[str] = []
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, cwd=REPO)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            watch.forget()
            for line in proc.stdout:
                if not line.startswith(SYNC):
                    lines.append(line)
                    continue
                step = json.loads(line[len(SYNC) :])
                counts = {int(d): k for d, k in step["counts"].items()}
                kind = "ADDED" if step["kind"] == "add" else "DELETED"
                seen = watch.wait(kind, cookie_marker(step["cookie"]), counts, step["sent"], WATCH_S)
                if seen is None:
                    missed.append(f"{step['kind']} cookie {step['cookie']:#x}: not seen")
                elif step["i"] >= warmup:
                    (visible_s if kind == "ADDED" else gone_s).append(seen - step["sent"])
                if kind == "DELETED":
                    watch.forget()  # nothing of this floor is in flight now
                proc.stdin.write("\n")
                proc.stdin.flush()
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"watched floor failed ({proc.returncode}): {log.read_text()[-1500:]}")
    out = json.loads(lines[-1])
    out.update(visible_s=visible_s, gone_s=gone_s, watch_missed=missed)
    return out


def sequential_lanes(api: Api, src_ip: str, n: int, warmup: int, offset: int = 0, check: Any = None) -> dict[str, Any]:
    """Request, time, release ``n`` lanes one after another (after ``warmup`` untimed ones)."""
    client_s, server_ms, release_s, failures = [], [], [], []
    for i, flow in enumerate(flows(n + warmup, offset)):
        t0 = time.perf_counter()
        status, lane = api.call("POST", "/api/v1/lanes", lane_body(src_ip, flow))
        t1 = time.perf_counter()
        if status != 201 or lane.get("state") != "active":
            failures.append(f"{status}: {lane.get('state', '')} {lane.get('reason') or lane.get('message')}")
            continue
        if check is not None and i == warmup:
            check(lane)
        api.ok("POST", f"/api/v1/lanes/{lane['id']}/release")
        t2 = time.perf_counter()
        if i >= warmup:
            client_s.append(t1 - t0)
            server_ms.append(lane["activation_ms"])
            release_s.append(t2 - t1)
    return {
        "client_s": client_s,
        "dataplane_s": [ms / 1000.0 for ms in server_ms if ms is not None],
        "release_s": release_s,
        "failures": failures,
    }


def api_without_switches(c: Campus, n: int) -> dict[str, Any]:
    """The same requests against ``serve --dataplane memory``: HTTP + auth + policy + SQLite only."""
    workdir = c.workdir / "memory"
    workdir.mkdir()
    serve = bench_serve(workdir, free_port(), dataplane="memory").start()
    try:
        token, _ = researcher(serve, serve.add_operator(), "alice", [grant_body("alice", c.host_ip(SRC), max_lanes=20)])
        api = Api(serve.api_port, token)
        out = sequential_lanes(api, c.host_ip(SRC), n, warmup=10)
        api.close()
        return out
    finally:
        serve.stop()


def api_lanes(c: Campus, n: int, dataplane: str, db_url: str) -> tuple[dict[str, Any], dict[str, Any], float | None]:
    """The measured run: a real serve, the bridges attached, ``n`` lanes one after another."""
    serve = bench_serve(c.workdir, free_port(), dataplane=dataplane, db_url=db_url).start()
    try:
        c.attach(serve)
        token, _ = researcher(serve, serve.add_operator(), "alice", [grant_body("alice", c.host_ip(SRC), max_lanes=20)])
        api = Api(serve.api_port, token)
        seen: dict[str, Any] = {}

        def check(lane: dict[str, Any]) -> None:  # what OVS holds while the lane is active
            seen["flows_on_switches"] = c.lane_flows(lane["id"])

        api_run = sequential_lanes(api, c.host_ip(SRC), n, warmup=10, check=check)
        api.close()
        return api_run, seen, serve.rss_mb()
    finally:
        serve.stop()


def run(quick: bool = False, dataplane: str = "openflow", db: str = "sqlite", **_: Any) -> Result:
    n = 30 if quick else 200
    res = Result("activation")
    with campus("activation") as c:
        floor = run_floor(c, n)
        floor_batched = run_floor(c, n, batched=True)
        floor_bundle = run_floor(c, n, bundle=True, batched=True)
        no_switches = api_without_switches(c, n)
        with database(db, c.workdir) as db_url:
            api_run, seen, rss = api_lanes(c, n, dataplane, db_url)
    if not api_run["client_s"]:
        res.error = f"no lane became active: {api_run['failures'][:3]}"
        return res
    api_sum = summarize_ms(api_run["client_s"])
    dp_sum = summarize_ms(api_run["dataplane_s"]) if api_run["dataplane_s"] else None
    floor_sum = summarize_ms(floor["latency_s"])
    res.add("API p50", api_sum.p50_ms, "ms", Target("<=", 10))
    res.add("API p95", api_sum.p95_ms, "ms")
    res.add("API p99", api_sum.p99_ms, "ms", Target("<=", 30))
    if dp_sum:
        res.add("controller part p50", dp_sum.p50_ms, "ms", note="activation_ms")
    res.add("floor p50", floor_sum.p50_ms, "ms")
    res.add("floor p99", floor_sum.p99_ms, "ms")
    fb = summarize_ms(floor_batched["latency_s"])
    res.add("floor p50, one write per switch", fb.p50_ms, "ms", note=f"p99 {fb.p99_ms:.2f} ms")
    fu = summarize_ms(floor_bundle["latency_s"])
    res.add("floor p50, atomic bundle per switch", fu.p50_ms, "ms", note=f"p99 {fu.p99_ms:.2f} ms")
    mem_sum = summarize_ms(no_switches["client_s"]) if no_switches["client_s"] else None
    if mem_sum:
        res.add("API p50, no switches", mem_sum.p50_ms, "ms", note="--dataplane memory")
    res.add("ratio p50 API/floor", ratio(api_sum.p50_ms, floor_sum.p50_ms), "x")
    res.add("ratio p99 API/floor", ratio(api_sum.p99_ms, floor_sum.p99_ms), "x")
    res.details = {
        "lanes": n,
        "source_host": SRC,
        "api": api_sum.as_dict(),
        "api_dataplane_part": dp_sum.as_dict() if dp_sum else None,
        "api_memory_dataplane": mem_sum.as_dict() if mem_sum else None,
        "dataplane": dataplane,
        "db": db,
        "release": summarize_ms(api_run["release_s"]).as_dict(),
        "floor": floor_sum.as_dict(),
        "floor_one_write_per_switch": fb.as_dict(),
        "floor_batched_failures": floor_batched["failures"],
        "floor_bundle": fu.as_dict(),
        "floor_bundle_failures": floor_bundle["failures"],
        "floor_bundle_errors": floor_bundle["errors"],
        "floor_bundle_flows_present": floor_bundle["bundle_flows_present"],
        "floor_compile": summarize_ms(floor["compile_s"]).as_dict(),
        "floor_removal": summarize_ms(floor["removal_s"]).as_dict(),
        "floor_failures": floor["failures"],
        "floor_errors": floor["errors"],
        "flows_per_lane": floor["flows_per_lane"],
        "switches_per_lane": floor["switches_per_lane"],
        "api_failures": api_run["failures"][:20],
        "api_failure_count": len(api_run["failures"]),
        "first_lane_flows_on_switches": seen.get("flows_on_switches"),
        "serve_rss_mb": rss,
        "samples_ms": {"api": [s * 1000 for s in api_run["client_s"]], "floor": [s * 1000 for s in floor["latency_s"]]},
    }
    return res
