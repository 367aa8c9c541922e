"""Benchmark 2: concurrent clients request and release lanes for a while (default 60 s).

Each client thread owns a keep-alive connection, a source host and its own set of flows; it loops
request -> (active) -> release. Reported: activations per second over the run and the latency
distribution of the activations (request until the answer said active).
"""
from __future__ import annotations

import threading
import time
from typing import Any

from bench.campus import campus
from bench.pg import database
from bench.report import RESULTS_DIR, Result, Target
from bench.server import Api, CpuMeter, Serve, free_port, researcher
from bench.spy import Sampler
from bench.stats import summarize_ms
from bench.workload import flows, grant_body, lane_body

SOURCES = ("desktop", "server", "dtn")
FLOWS_PER_CLIENT = 200


def client_loop(api: Api, src_ip: str, offset: int, stop_at: float, out: dict[str, Any]) -> None:
    mine = list(flows(FLOWS_PER_CLIENT, offset))
    i = 0
    while time.perf_counter() < stop_at:
        flow = mine[i % len(mine)]
        i += 1
        t0 = time.perf_counter()
        try:
            status, lane = api.call("POST", "/api/v1/lanes", lane_body(src_ip, flow))
        except OSError as exc:
            out["errors"].append(f"{exc.__class__.__name__}: {exc}")
            api.close()
            continue
        t1 = time.perf_counter()
        if status != 201 or lane.get("state") != "active":
            out["failures"].append(f"{status} {lane.get('error') or lane.get('state')}: "
                                   f"{lane.get('message') or lane.get('reason')}")
            continue
        out["latency_s"].append(t1 - t0)
        out["done_at"].append(t1)
        status, _ = api.call("POST", f"/api/v1/lanes/{lane['id']}/release")
        if status != 200:
            out["failures"].append(f"release {status}")
        else:
            out["releases"] += 1


def run(quick: bool = False, duration: float | None = None, clients: int = 8,
        dataplane: str = "openflow", profile: bool = False, db: str = "sqlite", **_: Any) -> Result:
    duration = duration if duration is not None else (10.0 if quick else 60.0)
    res = Result("churn")
    with campus("churn") as c, database(db, c.workdir) as db_url:
        serve = Serve(c.workdir, free_port(), dataplane=dataplane, threads=max(8, clients),
                      db_url=db_url).start()
        try:
            c.attach(serve)
            srcs = {name: c.host_ip(name) for name in SOURCES}
            token, _ = researcher(serve, serve.add_operator(), "alice",
                                  [grant_body("alice", ip, max_lanes=clients) for ip in srcs.values()])
            shared: dict[str, Any] = {"latency_s": [], "done_at": [], "failures": [], "errors": [],
                                      "releases": 0}
            outs = [dict(shared, latency_s=[], done_at=[], failures=[], errors=[]) for _ in range(clients)]
            apis = [Api(serve.api_port, token) for _ in range(clients)]
            sampler = Sampler(serve.proc.pid, RESULTS_DIR / "churn.pyspy.txt", duration) \
                if profile and serve.proc else None
            cpu = CpuMeter(serve.proc.pid if serve.proc else None)
            start = time.perf_counter()
            stop_at = start + duration
            threads = [threading.Thread(target=client_loop, daemon=True,
                                        args=(apis[k], srcs[SOURCES[k % len(SOURCES)]],
                                              k * FLOWS_PER_CLIENT, stop_at, outs[k]))
                       for k in range(clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(duration + 120)
            elapsed = time.perf_counter() - start
            cpu_used = cpu.stop()
            for api in apis:
                api.close()
            rss = serve.rss_mb()
            spy = sampler.stop() if sampler else None
        finally:
            serve.stop()
    latency = [x for o in outs for x in o["latency_s"]]
    failures = [x for o in outs for x in o["failures"]]
    errors = [x for o in outs for x in o["errors"]]
    if not latency:
        res.error = f"no activation succeeded: {(failures + errors)[:3]}"
        return res
    s = summarize_ms(latency)
    rate = len(latency) / elapsed
    res.add("activations/s", rate, "/s", Target(">=", 300))
    res.add("activation p50", s.p50_ms, "ms")
    res.add("activation p99", s.p99_ms, "ms", Target("<=", 30))
    res.add("failed requests", float(len(failures) + len(errors)), "")
    serve_cpu = cpu_used.get("serve_cpu_s")
    if serve_cpu is not None:
        res.add("serve CPU per activation+release", serve_cpu / len(latency) * 1000, "ms",
                note=f"serve busy {serve_cpu / elapsed * 100:.0f}% of one core")
    res.details = {"duration_s": duration, "elapsed_s": elapsed, "clients": clients,
                   "sources": list(SOURCES), "activations": len(latency),
                   "releases": sum(o["releases"] for o in outs), "latency": s.as_dict(),
                   "per_second": per_second([t - start for o in outs for t in o["done_at"]]),
                   "failures": failures[:20], "errors": errors[:20], "serve_rss_mb": rss,
                   "dataplane": dataplane, "db": db, "py_spy": spy, "cpu": cpu_used}
    return res


def per_second(offsets_s: list[float]) -> list[int]:
    """Activations completed in each whole second of the run."""
    if not offsets_s:
        return []
    buckets = [0] * (int(max(offsets_s)) + 1)
    for t in offsets_s:
        buckets[int(t)] += 1
    return buckets
