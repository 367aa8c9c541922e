"""Profile the northbound part of ``POST /lanes`` (policy + store, in-memory data plane).

    .venv/bin/python -m bench.probes.profile_request --lanes 10000 --requests 200

Fills a SQLite store with ``--lanes`` active DTN lanes through ``LaneManager.request`` (as the API
would), then profiles desktop lane requests + releases with cProfile and prints the top entries
and the time per request. Used to find why latency grows with the number of live lanes.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lanes", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sql", action="store_true", help="also time each SQL statement (no cProfile)")
    args = ap.parse_args(argv)

    from bench.harness.workload import flows, grant_body
    from viplanes.api.app import default_topology
    from viplanes.authz.tokens import Caller
    from viplanes.dataplane.memory import MemoryDataplane
    from viplanes.lanes.manager import LaneInput, LaneManager
    from viplanes.store import records as store
    from viplanes.store.db import Database

    topo = default_topology()
    dtn, desktop = (str(topo.host(h).iface.ip.ip) for h in ("dtn", "desktop"))
    with tempfile.TemporaryDirectory(prefix="viplanes-profile-") as tmp:
        db = Database(f"sqlite:///{Path(tmp) / 'p.db'}")
        db.create_all()
        now = time.time()
        with db.write() as s:
            p, _ = store.create_principal(s, "alice", "researcher", now)
            for src, max_lanes in ((dtn, max(1, min(10_000, args.lanes))), (desktop, 5)):
                g = grant_body("alice", src, max_lanes)
                store.create_grant(s, store.GrantInput(**g), "bench", now)
        caller = Caller(id=p.id, name="alice", role="researcher")
        mgr = LaneManager(db, MemoryDataplane(), topo)

        def lane(src: str, flow) -> LaneInput:  # type: ignore[no-untyped-def]
            return LaneInput(
                src_ip=src,
                dst_ip=flow.dst_ip,
                protocol="tcp",
                dst_port=flow.dst_port,
                duration_s=3600,
                purpose="profile",
            )

        t0 = time.perf_counter()
        for flow in flows(args.lanes):
            mgr.request(caller, lane(dtn, flow))
        print(f"filled {args.lanes} lanes in {time.perf_counter() - t0:.1f} s")

        def probe() -> None:
            for flow in flows(args.requests, 20_000):
                got, _ = mgr.request(caller, lane(desktop, flow))
                mgr.end(caller, got.id, "released")

        if args.sql:
            sql_times(db, probe, args.requests)
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.runcall(probe)
        took = time.perf_counter() - t0
        print(
            f"{args.requests} request+release at {args.lanes} live lanes: "
            f"{took / args.requests * 1000:.2f} ms each (under cProfile)"
        )
        pstats.Stats(prof).sort_stats("cumulative").print_stats(args.top)
        db.dispose()


def sql_times(db, probe, requests: int) -> None:  # type: ignore[no-untyped-def]
    """Run ``probe`` once more with per-statement timing; print the statements by total time."""
    from collections import defaultdict

    from sqlalchemy import event

    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])

    @event.listens_for(db.engine, "before_cursor_execute")
    def _before(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        conn.info["t0"] = time.perf_counter()

    @event.listens_for(db.engine, "after_cursor_execute")
    def _after(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        entry = totals[" ".join(statement.split())[:150]]
        entry[0] += time.perf_counter() - conn.info.pop("t0")
        entry[1] += 1

    t0 = time.perf_counter()
    probe()
    took = time.perf_counter() - t0
    event.remove(db.engine, "before_cursor_execute", _before)
    event.remove(db.engine, "after_cursor_execute", _after)
    print(f"without profiler: {took / requests * 1000:.2f} ms per request+release")
    for stmt, (total, count) in sorted(totals.items(), key=lambda kv: -kv[1][0])[:12]:
        print(f"{total / requests * 1000:7.3f} ms/req  x{count / requests:.0f}  {stmt}")


if __name__ == "__main__":
    main()
