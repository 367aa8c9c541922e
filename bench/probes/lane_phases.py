"""Where one activation and one release spend their time before the switches are told, per database.

    .venv/bin/python -m bench.probes.lane_phases --db sqlite --db postgresql --n 300

The API's Flask app in this process (the test client: no HTTP socket), on a data plane that
carries nothing but declares what ``serve``'s in-process controller declares (batches, deletes
sent before the end is committed) and stamps the moment it is asked to send. Per request the
probe prints the median wall milliseconds from the request's start to: the caller known, the
decision's transaction open, the row committed, the send (``activate``: what the peers
benchmark's "visible" clock waits for, less the switches' part), the outcome recorded and the
answer; for a release to the send (``begin_deactivate``) and the answer. It also counts the
round trips to PostgreSQL each request costs before its send (SQLite: not counted, a listener
would slow it), and the CPU of this process per request. ``--profile N``: the activations under
cProfile, the top N functions by their own (wall) time. PostgreSQL is a throwaway cluster
(``bench.harness.pg``, as the peers benchmark's).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness.pg import database
from bench.harness.workload import flows, grant_body, lane_body
from viplanes.dataplane.base import PlaneCapabilities
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.domain.values import ActivationResult, LaneSpec


class _Stamps:
    """perf_counter stamps of one request, by name, and the statements seen before the send."""

    def __init__(self) -> None:
        self.t: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.sent_before: list[str] = []
        self.statements: list[str] = []

    def mark(self, name: str) -> None:
        if name not in self.t:
            self.t[name], self.cpu[name] = time.perf_counter(), time.thread_time()


STAMPS = _Stamps()


class StampingPlane(MemoryDataplane):
    """``serve``'s declared capabilities; stamps the send and the deletes."""

    capabilities = PlaneCapabilities(batches=True, removes_early=True)

    def activate(self, lane: LaneSpec, timeout_s: float = 5.0) -> ActivationResult:
        STAMPS.mark("send")
        STAMPS.sent_before = list(STAMPS.statements)
        return super().activate(lane, timeout_s)

    def begin_deactivate(self, lane_id: int, timeout_s: float = 5.0) -> Callable[[], None] | None:
        STAMPS.mark("send")
        STAMPS.sent_before = list(STAMPS.statements)
        self.deactivate(lane_id)
        return lambda: None


def _hook_statements(engine: Any) -> None:
    from sqlalchemy import event

    def server_sees(conn: Any) -> bool:  # psycopg2 sends BEGIN / COMMIT only off autocommit
        return not conn.connection.dbapi_connection.autocommit

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        STAMPS.mark("begin")
        if server_sees(conn):
            STAMPS.statements.append("BEGIN")

    @event.listens_for(engine, "commit")
    def _commit(conn: Any) -> None:
        if server_sees(conn):
            STAMPS.statements.append("COMMIT")

    @event.listens_for(engine, "before_cursor_execute")
    def _stmt(_c: Any, _cur: Any, text: str, *_: Any) -> None:
        STAMPS.statements.append("+".join(p.split(None, 1)[0].upper() for p in text.split(";") if p.strip()))


def run(db: str, n: int, warmup: int, profile: int = 0) -> dict[str, Any]:
    from tests.support.apps import make_app
    from viplanes.config import AppConfig
    from viplanes.store import records as store

    with tempfile.TemporaryDirectory(prefix="viplanes-phases-") as tmp, database(db, Path(tmp)) as url:
        plane = StampingPlane()
        app = make_app(AppConfig(db_url=url), dataplane=plane)
        ctx = app.extensions["viplanes"]
        src = str(ctx.topology.host("desktop").iface.ip.ip)
        with ctx.db.write() as s:
            _, token = store.create_principal(s, "alice", "researcher", time.time())
            store.create_grant(s, store.GrantInput(**grant_body("alice", src, 5)), "bench", time.time())
        if not ctx.db.is_sqlite:  # on SQLite a listener would turn off its raw statements (lanesql/sqlite.py)
            _hook_statements(ctx.db.engine)
        client = app.test_client()
        headers = {"Authorization": f"Bearer {token}"}

        inner = app.wsgi_app

        def stamped(environ: Any, start_response: Any) -> Any:
            STAMPS.mark("start")
            return inner(environ, start_response)

        app.wsgi_app = stamped  # type: ignore[method-assign]

        seen: dict[str, list[dict[str, float]]] = {"activation": [], "release": []}
        counts: dict[str, list[tuple[str, ...]]] = {"activation": [], "release": []}
        cpu: dict[str, list[float]] = {"activation": [], "release": []}

        def one(kind: str, call: Callable[[], Any], keep: bool) -> Any:
            global STAMPS
            STAMPS = _Stamps()
            c0, t0 = time.thread_time(), time.perf_counter()
            r = call()
            t_end, c_end = time.perf_counter(), time.thread_time()
            if keep:
                st = STAMPS.t
                base = st.get("start", t0)
                cbase = STAMPS.cpu.get("start", c0)
                row = {k: (v - base) * 1000 for k, v in st.items() if k != "start"}
                row.update({f"cpu_{k}": (v - cbase) * 1000 for k, v in STAMPS.cpu.items() if k != "start"})
                row["answer"] = (t_end - base) * 1000
                row["cpu_answer"] = (c_end - cbase) * 1000
                row["client_to_start"] = (base - t0) * 1000
                seen[kind].append(row)
                counts[kind].append(tuple(STAMPS.sent_before))
                cpu[kind].append((c_end - c0) * 1000)
            return r

        prof = cProfile.Profile()
        for i, flow in enumerate(flows(n + warmup)):
            keep = i >= warmup
            if keep and profile:
                prof.enable()
            r = one(
                "activation", lambda f=flow: client.post("/api/v1/lanes", json=lane_body(src, f), headers=headers), keep
            )
            prof.disable()
            assert r.status_code == 201 and r.json["state"] == "active", r.json
            lane_id = r.json["id"]
            r2 = one("release", lambda i=lane_id: client.post(f"/api/v1/lanes/{i}/release", headers=headers), keep)
            assert r2.status_code == 200, r2.json
        ctx.db.dispose()
        if profile:  # wall time per function (a blocking ``cursor.execute`` counts its wait)
            pstats.Stats(prof).sort_stats("tottime").print_stats(profile)
    return {"seen": seen, "counts": counts, "cpu": cpu}


def _median(rows: list[dict[str, float]], key: str) -> float | None:
    vals = [r[key] for r in rows if key in r]
    return statistics.median(vals) if vals else None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", action="append", choices=["sqlite", "postgresql"])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile the activations: top N by own time")
    args = ap.parse_args(argv)
    import os

    load0 = os.getloadavg()[0]
    for db in args.db or ["sqlite", "postgresql"]:
        got = run(db, args.n, args.warmup, args.profile)
        for kind in ("activation", "release"):
            rows = got["seen"][kind]
            parts = ", ".join(
                f"{k} {m:.3f} (cpu {_median(rows, 'cpu_' + k) or 0:.3f})"
                for k in ("begin", "send", "answer")
                if (m := _median(rows, k)) is not None
            )
            sent = max(set(got["counts"][kind]), key=got["counts"][kind].count)
            print(
                f"{db:10s} {kind:10s} median ms from the request's start: {parts}; "
                f"CPU/request p50 {statistics.median(got['cpu'][kind]):.3f} ms; "
                f"before the send: {len(sent)} round trips {' '.join(sent)}"
            )
    print(f"load average (1 min) {load0:.2f} -> {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
