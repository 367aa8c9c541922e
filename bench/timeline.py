"""Where one activation and one release spend their time inside ``viplanes serve``.

    .venv/bin/python -m bench.timeline --n 40

Runs serve with ``BENCH_PATCH=timeline`` (bench/timeline_patch.py: perf_counter stamps at each
step), activates and releases lanes one after another like the peers benchmark (request ->
visible through the same FlowWatch), then prints, per step, the median time since the client sent
the request (ms): the server's stamps, the client's answer and the switches' "visible"/"gone".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

from bench.activation import SRC
from bench.campus import campus
from bench.flowwatch import FlowWatch, cookie_marker
from bench.peers import lane_messages
from bench.pg import database
from bench.server import Api, Serve, free_port, researcher
from bench.workload import flows, grant_body, lane_body


def label(stamps: list[list[Any]]) -> list[tuple[str, float]]:
    """Name repeated stamps ``name #k`` so the k-th switch's write or barrier lines up."""
    seen: dict[str, int] = {}
    out = []
    for name, t, _thread in stamps:
        seen[name] = seen.get(name, 0) + 1
        out.append((f"{name} #{seen[name]}" if seen[name] > 1 else name, t))
    return out


def medians(samples: list[dict[str, float]]) -> list[tuple[str, float, int]]:
    """(step, median ms since the client's send, how many samples had it), in time order."""
    keys: dict[str, list[float]] = {}
    for s in samples:
        for k, v in s.items():
            keys.setdefault(k, []).append(v)
    rows = [(k, statistics.median(v), len(v)) for k, v in keys.items()]
    return sorted(rows, key=lambda r: r[1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--patch", default="", help="more BENCH_PATCH names, comma-separated")
    args = ap.parse_args(argv)
    from viplanes.controller.compile.cookies import lane_cookie

    with campus("tline") as c:
        trace = c.workdir / "timeline.jsonl"
        os.environ["BENCH_PATCH"] = ",".join(filter(None, ["timeline", args.patch]))
        os.environ["BENCH_TIMELINE"] = str(trace)
        counts = {d: len(m) for d, m in lane_messages(c, 1, next(flows(1))).items()}
        client: list[tuple[dict[str, float], dict[str, float]]] = []
        with FlowWatch({d: c.bridges.names[d] for d in counts}) as watch, database("sqlite", c.workdir) as db_url:
            serve = Serve(c.workdir, free_port(), db_url=db_url).start()
            try:
                c.attach(serve)
                token, _ = researcher(
                    serve, serve.add_operator(), "alice", [grant_body("alice", c.host_ip(SRC), max_lanes=20)]
                )
                api = Api(serve.api_port, token)
                for i, flow in enumerate(flows(args.n + args.warmup, offset=1000)):
                    watch.forget()
                    t0 = time.perf_counter()
                    status, lane = api.call("POST", "/api/v1/lanes", lane_body(c.host_ip(SRC), flow))
                    t_answer = time.perf_counter()
                    marker = cookie_marker(lane_cookie(lane["id"]))
                    t_vis = watch.wait("ADDED", marker, counts, t0, 10.0)
                    t1 = time.perf_counter()
                    api.ok("POST", f"/api/v1/lanes/{lane['id']}/release")
                    t_rel = time.perf_counter()
                    t_gone = watch.wait("DELETED", marker, counts, t1, 10.0)
                    if i >= args.warmup and t_vis and t_gone:
                        client.append(
                            (
                                {"t0": t0, "CLIENT answer": t_answer, "SWITCHES visible": t_vis},
                                {"t0": t1, "CLIENT answer": t_rel, "SWITCHES gone": t_gone},
                            )
                        )
                    else:
                        client.append(({}, {}))
                api.close()
            finally:
                serve.stop()
                c.bridges.disconnect()
        lines = [json.loads(x) for x in trace.read_text().splitlines()]
    acts = [x for x in lines if any(s[0] == "committed installing" for s in x)]
    rels = [x for x in lines if any(s[0] == "released written (before commit)" for s in x)]
    for what, server, idx in (("activation", acts, 0), ("release", rels, 1)):
        samples = []
        for pair, stamps in zip(client, server):
            c0 = pair[idx]
            if not c0:
                continue
            row = {k: (t - c0["t0"]) * 1000 for k, t in label(stamps)}
            row.update({k: (t - c0["t0"]) * 1000 for k, t in c0.items() if k != "t0"})
            samples.append(row)
        print(
            f"\n{what}: median ms since the client's send ({len(samples)} samples, load {os.getloadavg()[0]:.2f})",
            file=sys.stderr,
        )
        prev = 0.0
        for k, v, n in medians(samples):
            print(f"  {v:7.3f}  (+{v - prev:6.3f})  {k}  [{n}]", file=sys.stderr)
            prev = v


if __name__ == "__main__":
    main()
