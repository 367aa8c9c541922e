"""Benchmark 2: concurrent clients request and release lanes for a while (default 60 s).

Each client thread owns a keep-alive connection, a source host and its own set of flows; it loops
request -> (active) -> release. Reported: activations per second over the run and the latency
distribution of the activations (request until the answer said active), and CPU per
activation+release of every process that works for it.

Two deployments (issue 12), each on its own campus bridges, one after the other in the same run:
``embedded`` (one ``viplanes serve`` on SQLite, or ``--db postgresql``) and ``split`` (``viplanes
api --workers 2`` + ``viplanes controller cluster`` on a throwaway PostgreSQL, ``bench.harness.split``).
With both, a last row gives split/embedded against the issue's >= 2x.

    sudo .venv/bin/python -m bench.suite.churn --deployment both --duration 20
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

from bench.harness.campus import Campus, campus
from bench.harness.pg import database, throwaway_postgres
from bench.harness.report import RESULTS_DIR, Result, Target, print_table
from bench.harness.server import Api, CpuMeter, bench_serve, free_port, researcher
from bench.harness.split import SplitDeployment
from bench.harness.spy import Sampler
from bench.harness.stats import summarize_ms
from bench.harness.workload import flows, grant_body, lane_body

SOURCES = ("desktop", "server", "dtn")
FLOWS_PER_CLIENT = 200
SPLIT_API_WORKERS = 2


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
            out["failures"].append(
                f"{status} {lane.get('error') or lane.get('state')}: {lane.get('message') or lane.get('reason')}"
            )
            continue
        out["latency_s"].append(t1 - t0)
        out["done_at"].append(t1)
        status, _ = api.call("POST", f"/api/v1/lanes/{lane['id']}/release")
        if status != 200:
            out["failures"].append(f"release {status}")
        else:
            out["releases"] += 1


def drive(c: Campus, server: Any, clients: int, duration: float, cpu: Any, *samplers: Sampler) -> dict[str, Any]:
    """Run the clients against ``server`` (Serve or SplitDeployment) for ``duration`` seconds."""
    srcs = {name: c.host_ip(name) for name in SOURCES}
    token, _ = researcher(
        server, server.add_operator(), "alice", [grant_body("alice", ip, max_lanes=clients) for ip in srcs.values()]
    )
    outs: list[dict[str, Any]] = [
        {"latency_s": [], "done_at": [], "failures": [], "errors": [], "releases": 0} for _ in range(clients)
    ]
    apis = [Api(server.api_port, token) for _ in range(clients)]
    meter = cpu()
    start = time.perf_counter()
    stop_at = start + duration
    threads = [
        threading.Thread(
            target=client_loop,
            daemon=True,
            args=(apis[k], srcs[SOURCES[k % len(SOURCES)]], k * FLOWS_PER_CLIENT, stop_at, outs[k]),
        )
        for k in range(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(duration + 120)
    elapsed = time.perf_counter() - start
    cpu_used = meter.stop()
    for api in apis:
        api.close()
    return {
        "elapsed_s": elapsed,
        "cpu": cpu_used,
        "start": start,
        "latency_s": [x for o in outs for x in o["latency_s"]],
        "done_at": [t - start for o in outs for t in o["done_at"]],
        "failures": [x for o in outs for x in o["failures"]],
        "errors": [x for o in outs for x in o["errors"]],
        "releases": sum(o["releases"] for o in outs),
        "py_spy": [sampler.stop() for sampler in samplers] or None,
    }


def measure_embedded(clients: int, duration: float, dataplane: str, db: str, profile: bool) -> dict[str, Any]:
    with campus("churn") as c, database(db, c.workdir) as db_url:
        serve = bench_serve(c.workdir, free_port(), dataplane=dataplane, threads=max(8, clients), db_url=db_url).start()
        try:
            c.attach(serve)
            sampler = (
                Sampler(serve.proc.pid, RESULTS_DIR / "churn.pyspy.txt", duration) if profile and serve.proc else None
            )
            out = drive(
                c,
                serve,
                clients,
                duration,
                lambda: CpuMeter(serve.proc.pid if serve.proc else None),
                *([sampler] if sampler else []),
            )
            out["serve_rss_mb"] = serve.rss_mb()
        finally:
            serve.stop()
    return out


def measure_split(clients: int, duration: float, profile: bool) -> dict[str, Any]:
    with campus("split") as c, throwaway_postgres() as db_url:
        split = SplitDeployment(c.workdir, db_url, workers=SPLIT_API_WORKERS, threads=max(8, clients)).start()
        try:
            c.bridges.connect(split.of_port)
            c.wait_connected()
            split.wait_master()
            samplers = (
                [
                    Sampler(split.procs["controller"].pid, RESULTS_DIR / "churn-split-controller.pyspy.txt", duration),
                    Sampler(split.api_workers()[0], RESULTS_DIR / "churn-split-api.pyspy.txt", duration),
                ]
                if profile
                else []
            )
            out = drive(c, split, clients, duration, split.cpu_meter, *samplers)
        finally:
            split.stop()
    return out


def add_rows(res: Result, label: str, m: dict[str, Any]) -> float | None:
    """The table rows of one deployment; its activations/s."""
    latency = m["latency_s"]
    suffix = f" ({label})" if label else ""
    if not latency:
        res.error = f"{label or 'churn'}: no activation succeeded: {(m['failures'] + m['errors'])[:3]}"
        return None
    s = summarize_ms(latency)
    rate = len(latency) / m["elapsed_s"]
    res.add(f"activations/s{suffix}", rate, "/s", Target(">=", 300))
    res.add(f"activation p50{suffix}", s.p50_ms, "ms")
    res.add(f"activation p99{suffix}", s.p99_ms, "ms", Target("<=", 30))
    res.add(f"failed requests{suffix}", float(len(m["failures"]) + len(m["errors"])), "")
    for key, seconds in m["cpu"].items():
        if not key.endswith("_cpu_s") or seconds is None or key.startswith("bench"):
            continue
        role = key[: -len("_cpu_s")]
        res.add(
            f"{role} CPU per activation+release{suffix}",
            seconds / len(latency) * 1000,
            "ms",
            note=f"{role} busy {seconds / m['elapsed_s'] * 100:.0f}% of one core",
        )
    m["summary"] = s.as_dict()
    return rate


def details_of(m: dict[str, Any]) -> dict[str, Any]:
    return {
        "elapsed_s": m["elapsed_s"],
        "activations": len(m["latency_s"]),
        "releases": m["releases"],
        "latency": m.get("summary"),
        "per_second": per_second(m["done_at"]),
        "failures": m["failures"][:20],
        "errors": m["errors"][:20],
        "cpu": m["cpu"],
        "py_spy": m["py_spy"],
        "serve_rss_mb": m.get("serve_rss_mb"),
    }


def run(
    quick: bool = False,
    duration: float | None = None,
    clients: int = 8,
    dataplane: str = "openflow",
    profile: bool = False,
    db: str = "sqlite",
    deployment: str = "both",
    **_: Any,
) -> Result:
    duration = duration if duration is not None else (10.0 if quick else 60.0)
    if dataplane != "openflow" and deployment != "embedded":
        deployment = "embedded"  # the split deployment's controller is a real OpenFlow one
    res = Result("churn")
    res.details = {
        "duration_s": duration,
        "clients": clients,
        "sources": list(SOURCES),
        "dataplane": dataplane,
        "db": db,
        "deployment": deployment,
    }
    rates: dict[str, float | None] = {}
    labels = ["embedded", "split"] if deployment == "both" else [deployment]
    for label in labels:
        m = (
            measure_embedded(clients, duration, dataplane, db, profile)
            if label == "embedded"
            else measure_split(clients, duration, profile)
        )
        rates[label] = add_rows(res, label if deployment == "both" or label == "split" else "", m)
        res.details[label] = details_of(m)
    if deployment == "both" and rates.get("embedded") and rates.get("split"):
        res.add(
            "split / embedded activations/s",
            rates["split"] / rates["embedded"],
            "x",  # type: ignore[operator]
            Target(">=", 2.0),
            note="same run, one after the other",
        )
    return res


def per_second(offsets_s: list[float]) -> list[int]:
    """Activations completed in each whole second of the run."""
    if not offsets_s:
        return []
    buckets = [0] * (int(max(offsets_s)) + 1)
    for t in offsets_s:
        buckets[int(t)] += 1
    return buckets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deployment", choices=["embedded", "split", "both"], default="both")
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--profile", action="store_true", help="py-spy the serve / the controller")
    args = ap.parse_args()
    res = run(duration=args.duration, clients=args.clients, deployment=args.deployment, profile=args.profile)
    print_table([res])
    for label in ("embedded", "split"):
        if label in res.details:
            print(label, {k: round(v, 2) if isinstance(v, float) else v for k, v in res.details[label]["cpu"].items()})


if __name__ == "__main__":
    main()
