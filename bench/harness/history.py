"""A campus's lane history in a benchmark's database, so a system is measured as it is deployed.

A database created seconds before a run holds only the run's own lanes. A deployed campus keeps
every ended lane for the retention window (90 days by default), and PostgreSQL's autovacuum has
analyzed the table long before; the plans of the decision's prepared read are then made on
statistics, not on a table that was empty when they were first prepared. Measured with the peers
benchmark's PostgreSQL run (3 x 80 lanes each, ``bench/harness/history.py``'s ``seed``):
activation p50 10.59 ms on the new database, 10.16 ms with 5,000 ended lanes analyzed, and
15.64 ms with the same 5,000 lanes before any ANALYZE (the empty table's generic plans walk every
ended lane: what autovacuum's first pass, within a minute of the growth, ends on a deployment).
SQLite keeps no statistics unless told (``ANALYZE``), and a deployment never tells it, so it gets
the rows only.

The rows are copies of a lane the system itself wrote and ended (every column as the product
wrote it), each with its own port and its times moved back into the window, evenly spread.
"""

from __future__ import annotations

from sqlalchemy import MetaData, Table, create_engine, insert, select

from viplanes.store.db import resolve_db_url

RETENTION_S = 90 * 86400.0  # viplanes' default VIPLANES_LANE_RETENTION_DAYS
_TIMES = ("created_at", "starts_at", "expires_at", "activated_at", "ended_at", "dst_refresh_at")


def seed(db_url: str, n: int, like_lane_id: int) -> int:
    """Insert ``n`` ended copies of lane ``like_lane_id`` (which must have ended), spread back over
    the retention window; on PostgreSQL then ANALYZE, as autovacuum does. Returns the number of
    ended lanes in the table afterwards."""
    engine = create_engine(resolve_db_url(db_url))  # psycopg2 for PostgreSQL, as the product
    try:
        lanes = Table("lanes", MetaData(), autoload_with=engine, resolve_fks=False)
        with engine.begin() as conn:
            model = dict(conn.execute(select(lanes).where(lanes.c.id == like_lane_id)).mappings().one())
            if model["ended_at"] is None:
                raise ValueError(f"lane {like_lane_id} has not ended ({model['state']}): no history to copy")
            del model["id"]
            model.update(idempotency_key=None, request_hash=None)
            step = RETENTION_S / max(n, 1)
            rows = []
            for i in range(n):
                row = {**model, "dst_port": 20_000 + i % 40_000}
                for col in _TIMES:
                    if row.get(col) is not None:
                        row[col] -= RETENTION_S - i * step
                rows.append(row)
            for start in range(0, n, 1000):
                conn.execute(insert(lanes), rows[start : start + 1000])
            ended = conn.execute(select(lanes.c.id).where(lanes.c.ended_at.is_not(None))).all()
        if engine.dialect.name == "postgresql":
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql("ANALYZE")
        return len(ended)
    finally:
        engine.dispose()
