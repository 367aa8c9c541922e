"""A/B: two checkouts of viplanes (old code, new code) on the same bridges, rounds interleaved.

    .venv/bin/python -m bench.probes.ab --tree old=/tmp/base --tree new=. --rounds 4 --n 50 [--db postgresql]

Each checkout needs its own ``.venv`` (``make setup`` in it). Every round starts one ``viplanes
serve`` per checkout, in alternating order (ABBA...), so both see the same load on a shared
machine. Per lane: "request -> visible on every switch" (``bench.harness.flowwatch``: OVS flow monitors,
the clock of the peers benchmark), "request -> 201", and for the release "request -> flows gone".
Lanes are activated and released one after another (one live lane at a time, as in the peers
benchmark). Serve's CPU per operation is the sum of its threads' run time (/proc/PID/task/*/schedstat,
nanoseconds) read before and after each request, so it includes the controller's threads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness.campus import Campus, campus
from bench.harness.flowwatch import FlowWatch, cookie_marker
from bench.harness.pg import database
from bench.harness.server import Api, bench_serve, free_port, researcher
from bench.harness.spy import Sampler
from bench.harness.stats import summarize_ms
from bench.harness.workload import flows, grant_body, lane_body
from bench.suite.activation import SRC
from bench.suite.peers import clear_flows, flow_counts, lane_messages

WAIT_S = 10.0
RESULTS = Path(__file__).resolve().parents[1] / "results"


def task_cpu_ns(pid: int) -> int:
    """CPU nanoseconds all threads of ``pid`` have run (schedstat: finer than /proc/stat's ticks)."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that just ended
    return total


def one_round(
    c: Campus, watch: FlowWatch, repo: Path, n: int, warmup: int, db: str, offset: int, spy_out: Path | None = None
) -> dict[str, Any]:
    """One serve from ``repo``: ``warmup`` + ``n`` lanes activated one after another, then released."""
    from viplanes.controller.compile.cookies import lane_cookie

    workdir = c.workdir / f"r{offset}"
    workdir.mkdir()
    counts = flow_counts(lane_messages(c, 1, next(flows(1))))
    out: dict[str, list[float]] = {
        k: [] for k in ("visible", "answer", "gone", "release_answer", "cpu_activation_ms", "cpu_release_ms")
    }
    with database(db, workdir) as db_url:
        serve = bench_serve(workdir, free_port(), db_url=db_url, repo=repo).start()
        try:
            c.attach(serve)
            token, _ = researcher(
                serve, serve.add_operator(), "alice", [grant_body("alice", c.host_ip(SRC), max_lanes=n + warmup + 5)]
            )
            api = Api(serve.api_port, token)
            assert serve.proc is not None
            pid = serve.proc.pid

            def activate(flow: Any) -> tuple[int, float, float]:
                watch.forget()
                t0 = time.perf_counter()
                status, lane = api.call("POST", "/api/v1/lanes", lane_body(c.host_ip(SRC), flow))
                t_answer = time.perf_counter()
                if status != 201 or lane.get("state") != "active":
                    raise RuntimeError(f"{status}: {lane}"[:300])
                t_vis = watch.wait("ADDED", cookie_marker(lane_cookie(lane["id"])), counts, t0, WAIT_S)
                if t_vis is None:
                    raise RuntimeError(f"lane {lane['id']}: flows not seen")
                return int(lane["id"]), t_vis - t0, t_answer - t0

            def release(lane_id: int) -> tuple[float, float]:
                watch.forget()
                t0 = time.perf_counter()
                api.ok("POST", f"/api/v1/lanes/{lane_id}/release")
                t_answer = time.perf_counter()
                t_gone = watch.wait("DELETED", cookie_marker(lane_cookie(lane_id)), counts, t0, WAIT_S)
                if t_gone is None:
                    raise RuntimeError(f"lane {lane_id}: flows not removed")
                return t_gone - t0, t_answer - t0

            sampler = None
            for i, flow in enumerate(flows(n + warmup, offset)):
                if i == warmup:
                    sampler = Sampler(pid, spy_out, 600) if spy_out else None
                c0 = task_cpu_ns(pid)
                lane_id, vis, answer = activate(flow)
                c1 = task_cpu_ns(pid)
                gone, rel_answer = release(lane_id)
                c2 = task_cpu_ns(pid)
                if i >= warmup:
                    for key, value in (
                        ("visible", vis),
                        ("answer", answer),
                        ("gone", gone),
                        ("release_answer", rel_answer),
                    ):
                        out[key].append(value)
                    out["cpu_activation_ms"].append((c1 - c0) / 1e6)
                    out["cpu_release_ms"].append((c2 - c1) / 1e6)
            if sampler is not None:
                sampler.stop()
            api.close()
        finally:
            serve.stop()
            c.bridges.disconnect()
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", required=True, help="name=path of a checkout with .venv")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--n", type=int, default=50, help="timed lanes per round and checkout")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    ap.add_argument("--json", type=Path, help="write every sample here")
    ap.add_argument(
        "--spy",
        metavar="NAME",
        help="py-spy this checkout's serve in an extra, untimed "
        "first round (raw stacks in bench/results/ab-NAME.pyspy.txt)",
    )
    args = ap.parse_args(argv)
    trees = {name: Path(path).resolve() for name, path in (t.split("=", 1) for t in args.tree)}
    load = [os.getloadavg()[0]]
    pooled: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    with campus("ab") as c:
        lane_dpids = sorted(lane_messages(c, 1, next(flows(1))))
        with FlowWatch({d: c.bridges.names[d] for d in lane_dpids}) as watch:
            offset = 0
            if args.spy:  # its own round, left out of the table: the sampler costs CPU here
                clear_flows(c)
                one_round(
                    c,
                    watch,
                    trees[args.spy],
                    args.n,
                    args.warmup,
                    args.db,
                    offset,
                    RESULTS / f"ab-{args.spy}.pyspy.txt",
                )
                offset += args.n + args.warmup
            for r in range(args.rounds):
                order = list(trees) if r % 2 == 0 else list(reversed(trees))
                for name in order:
                    clear_flows(c)
                    got = one_round(c, watch, trees[name], args.n, args.warmup, args.db, offset)
                    offset += args.n + args.warmup
                    for key, value in got.items():
                        pooled[name].setdefault(key, []).extend(value)
                    print(
                        f"round {r} {name}: visible p50 {summarize_ms(got['visible']).p50_ms:.2f} ms, "
                        f"201 p50 {summarize_ms(got['answer']).p50_ms:.2f} ms, "
                        f"gone p50 {summarize_ms(got['gone']).p50_ms:.2f} ms, "
                        f"cpu p50 {summarize_ms([x / 1000 for x in got['cpu_activation_ms']]).p50_ms:.2f}"
                        f" + {summarize_ms([x / 1000 for x in got['cpu_release_ms']]).p50_ms:.2f} ms, "
                        f"load {os.getloadavg()[0]:.2f}",
                        file=sys.stderr,
                        flush=True,
                    )
                    load.append(os.getloadavg()[0])
    print(
        f"load average (1 min) during the run: {min(load):.2f}-{max(load):.2f}; db {args.db}; "
        f"{args.rounds} rounds x {args.n} lanes per checkout"
    )
    print(
        "| checkout | visible p50 / p99 ms | 201 p50 / p99 ms | release gone p50 / p99 ms "
        "| release 200 p50 ms | serve CPU ms / activation p50 | / release p50 |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, s in pooled.items():
        vis, ans, gone, rel = (summarize_ms(s[k]) for k in ("visible", "answer", "gone", "release_answer"))
        cpu_a, cpu_r = (summarize_ms([x / 1000 for x in s[k]]) for k in ("cpu_activation_ms", "cpu_release_ms"))
        print(
            f"| {name} | {vis.p50_ms:.2f} / {vis.p99_ms:.2f} | {ans.p50_ms:.2f} / {ans.p99_ms:.2f} "
            f"| {gone.p50_ms:.2f} / {gone.p99_ms:.2f} | {rel.p50_ms:.2f} "
            f"| {cpu_a.p50_ms:.2f} (mean {cpu_a.mean_ms:.2f}) | {cpu_r.p50_ms:.2f} (mean {cpu_r.mean_ms:.2f}) |"
        )
    if args.json:
        args.json.write_text(
            json.dumps({"trees": {k: str(v) for k, v in trees.items()}, "load": load, "samples": pooled}, indent=1)
        )


if __name__ == "__main__":
    main()
