"""Serve CPU per activation and per release with 0 and with N other live lanes (issue 13).

A release used to recompute the shared per-address flows of every live lane (22 ms of serve CPU
per release at 150 live lanes), so its cost grew with the number of lanes live elsewhere. This
runs real ``viplanes serve`` processes from one or more checkouts (each with its own ``.venv``,
as ``bench.probes.ab``) on the same userspace bridges, in alternating order (ABBA...). Per run: a fresh
database; ``--cycles`` desktop lanes activated and released one after another with no other
lane live; then ``--lanes`` lanes of another host filled through the API (they stay live); the
same cycles again. The filler is ``server`` by default: NAT'd and three switches away like the
desktop, so its lanes have shared flows (ICMP transit, its lane address's ARP reply) on the same
switches; ``--fill-src dtn`` (one switch, no NAT: no shared flows) is the cheap case. Serve's CPU per request is the sum of its threads' run time (schedstat, nanoseconds)
before and after each request, so it includes the controller's threads.

    .venv/bin/python -m bench.probes.livelanes --tree old=/tmp/base --tree new=. --lanes 1000 --cycles 200
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness.campus import Campus, campus
from bench.harness.server import Api, bench_serve, free_port, researcher
from bench.harness.stats import summarize_ms
from bench.harness.workload import flows, grant_body, lane_body
from bench.probes.ab import task_cpu_ns
from bench.suite.peers import clear_flows
from bench.suite.scale import PROBE_SRC, fill


def cycles(api: Api, pid: int, src_ip: str, n: int, offset: int) -> dict[str, list[float]]:
    """Activate and release ``n`` lanes one after another; serve CPU ms of each request."""
    out: dict[str, list[float]] = {"activation": [], "release": []}
    for flow in flows(n, offset):
        c0 = task_cpu_ns(pid)
        status, lane = api.call("POST", "/api/v1/lanes", lane_body(src_ip, flow))
        c1 = task_cpu_ns(pid)
        if status != 201 or lane.get("state") != "active":
            raise RuntimeError(f"{status}: {lane}"[:300])
        api.ok("POST", f"/api/v1/lanes/{lane['id']}/release")
        c2 = task_cpu_ns(pid)
        out["activation"].append((c1 - c0) / 1e6)
        out["release"].append((c2 - c1) / 1e6)
    return out


def one_run(c: Campus, repo: Path, live: int, n: int, warmup: int, tag: str, fill_src: str) -> dict[str, Any]:
    """One serve from ``repo``: cycles at 0 live lanes, fill ``live``, cycles again."""
    workdir = c.workdir / tag
    workdir.mkdir()
    serve = bench_serve(workdir, free_port(), repo=repo).start()
    try:
        c.attach(serve)
        token, _ = researcher(
            serve,
            serve.add_operator(),
            "alice",
            [
                grant_body("alice", c.host_ip(fill_src), live + 1),
                grant_body("alice", c.host_ip(PROBE_SRC), 2 * (n + warmup) + 5),
            ],
        )
        api = Api(serve.api_port, token)
        assert serve.proc is not None
        pid = serve.proc.pid
        time.sleep(2.0)  # start-up reconcile of the bridges is over
        probe = c.host_ip(PROBE_SRC)
        cycles(api, pid, probe, warmup, 0)
        empty = cycles(api, pid, probe, n, warmup)
        filled = fill(serve.api_port, token, c.host_ip(fill_src), live, 4)
        if filled["active"] != live:
            raise RuntimeError(f"filled {filled['active']} of {live}: {filled['failures'][:3]}")
        time.sleep(1.0)
        cycles(api, pid, probe, warmup, warmup + n)
        full = cycles(api, pid, probe, n, 2 * warmup + n)
        api.close()
        return {"empty": empty, "full": full, "fill_s": filled["seconds"]}
    finally:
        serve.stop()
        c.bridges.disconnect()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", required=True, help="name=path of a checkout with .venv")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--lanes", type=int, default=1000, help="other live lanes in the second half")
    ap.add_argument("--cycles", type=int, default=200, help="timed activation+release cycles")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--fill-src", default="server", help="host of the live lanes (not the desktop)")
    args = ap.parse_args(argv)
    trees = {name: Path(path).resolve() for name, path in (t.split("=", 1) for t in args.tree)}
    load = [os.getloadavg()[0]]
    pooled: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    with campus("livelanes") as c:
        for r in range(args.rounds):
            for name in list(trees) if r % 2 == 0 else list(reversed(trees)):
                clear_flows(c)
                got = one_run(c, trees[name], args.lanes, args.cycles, args.warmup, f"r{r}{name}", args.fill_src)
                row = []
                for at in ("empty", "full"):
                    for op in ("activation", "release"):
                        pooled[name].setdefault(f"{at} {op}", []).extend(got[at][op])
                        row.append(f"{at} {op} {summarize_ms([x / 1000 for x in got[at][op]]).p50_ms:.2f}")
                load.append(os.getloadavg()[0])
                print(
                    f"round {r} {name}: serve CPU ms p50: {', '.join(row)}; fill {got['fill_s']:.1f} s; "
                    f"load {load[-1]:.2f}",
                    file=sys.stderr,
                    flush=True,
                )
    print(
        f"load average (1 min) during the run: {min(load):.2f}-{max(load):.2f}; {args.rounds} rounds "
        f"x {args.cycles} cycles per checkout and live count; live lanes from {args.fill_src}"
    )
    print(
        f"| checkout | serve CPU / activation, 0 live (p50, mean) | at {args.lanes} live | "
        f"/ release, 0 live | at {args.lanes} live |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, s in pooled.items():
        cells = []
        for key in ("empty activation", "full activation", "empty release", "full release"):
            st = summarize_ms([x / 1000 for x in s[key]])
            cells.append(f"{st.p50_ms:.2f} ({st.mean_ms:.2f}) ms")
        print(f"| {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
