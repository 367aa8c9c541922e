"""Retention cost: prune 50,000 ended lanes and 100,000 audit events (``viplanes.store.retention``).

Reports the run time, the batches and the export + fsync time per batch (each batch holds the
SQLite writer lock, or PostgreSQL's prune advisory lock, for about run time / batches).

    .venv/bin/python -m bench.suite.prune              # SQLite file in a temporary directory
    sudo .venv/bin/python -m bench.suite.prune --db postgresql   # a throwaway PostgreSQL cluster
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections.abc import Iterator

from sqlalchemy import insert

from viplanes.store import records as store
from viplanes.store import retention
from viplanes.store.db import Database
from viplanes.store.models import AuditEvent, Lane

LANES, EVENTS = 50_000, 100_000


@contextlib.contextmanager
def _url(kind: str, tmp: str) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp}/prune.db"
        return
    from bench.harness.pg import throwaway_postgres

    with throwaway_postgres() as url:
        yield url


def _fill(db: Database, now: float) -> None:
    with db.write() as s:
        p, _ = store.create_principal(s, "alice", "researcher", now)
        g = store.create_grant(
            s,
            store.GrantInput(
                principal="alice",
                src_prefixes=["10.1.0.0/24"],
                dst_prefixes=["203.0.113.0/24"],
                protocols=["tcp"],
                ports=[9000],
                max_duration_s=3600,
            ),
            "root",
            now,
        )
    old = now - 100 * retention.DAY_S
    lane = {
        "principal_id": p.id,
        "grant_id": g.id,
        "src_ip": "10.1.0.10",
        "dst_ip": "203.0.113.10",
        "protocol": "tcp",
        "dst_port": 9000,
        "duration_s": 600,
        "purpose": "bench",
        "state": "expired",
        "reason": "window ended",
        "created_at": old,
        "starts_at": old,
        "expires_at": old,
    }
    with db.write() as s:
        s.execute(insert(Lane), [{**lane, "ended_at": old + i * 0.01} for i in range(LANES)])
        event = {"actor": "alice", "action": "lane.request", "target": "lane:1", "decision": "allow", "reason": "ok"}
        s.execute(insert(AuditEvent), [{**event, "at": now - 400 * retention.DAY_S + i} for i in range(EVENTS)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, _url(args.db, tmp) as url:
        db = Database(url)
        db.create_all()
        now = time.time()
        _fill(db, now)
        holds: list[float] = []
        write = retention._Export.write

        def timed(self: retention._Export, rows: list) -> None:
            t = time.perf_counter()
            write(self, rows)
            holds.append(time.perf_counter() - t)

        retention._Export.write = timed  # type: ignore[method-assign]
        t0 = time.perf_counter()
        cfg = retention.RetentionConfig(lane_days=90, audit_days=365, export_dir=f"{tmp}/archive", every_s=0)
        r = retention.prune(db, cfg, now)
        took = time.perf_counter() - t0
        size = sum(os.path.getsize(f) for f in r.files)
        holds.sort()
        print(
            f"{args.db}: {r.lanes} lanes + {r.audit_events} audit events in {took:.1f} s; {len(holds)} batches "
            f"(~{took / len(holds) * 1000:.0f} ms each), export+fsync p50 {holds[len(holds) // 2] * 1000:.1f} ms "
            f"max {holds[-1] * 1000:.1f} ms; {size / 1e6:.1f} MB exported"
        )
        db.dispose()


if __name__ == "__main__":
    main()
