"""The database URLs a fail-over needs, on a real PostgreSQL (issue 28, item 6): a libpq
multi-host URL with ``target_session_attrs``, the ``host=a,b&port=p1,p2`` query form and a
URL with a percent-encoded password. Each must work for every connection we open: the pool,
the LISTEN/NOTIFY connections (``viplanes.cluster.handoff``) and the migrations (an empty
database brought to head, as ``controller cluster`` does at start-up). The first host of each
multi-host URL is a port nobody listens on, so libpq must move on to the second.

And every connection carries keepalives and statement/lock timeouts (item 5)."""

from __future__ import annotations

import select
import time

import pytest
from sqlalchemy import text

from tests.support.procs import free_port
from viplanes.cluster.handoff import listen_connection
from viplanes.store.db import Database
from viplanes.store.migrations import current

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def empty_database(pg_cluster, name: str) -> str:
    pg_cluster._admin(f"DROP DATABASE IF EXISTS {name}")
    pg_cluster._admin(f"CREATE DATABASE {name}")
    return name


def url_forms(pg_cluster, db: str) -> dict[str, str]:
    dead = free_port()
    pg_cluster._admin(  # once per cluster (it owns what the tests migrate)
        "DO $$ BEGIN CREATE ROLE vl_pct LOGIN SUPERUSER PASSWORD 'p%w@rd:50%'; "
        "EXCEPTION WHEN duplicate_object THEN NULL; END $$"
    )
    return {
        "multi-host": f"postgresql://postgres@127.0.0.1:{dead},127.0.0.1:{pg_cluster.port}/{db}"
        "?target_session_attrs=read-write",
        "host-port-query": f"postgresql://postgres@/{db}?host=127.0.0.1,127.0.0.1&port={dead},{pg_cluster.port}",
        "percent-password": f"postgresql://vl_pct:p%25w%40rd%3A50%25@127.0.0.1:{pg_cluster.port}/{db}",
    }


@pytest.mark.parametrize("form", ["multi-host", "host-port-query", "percent-password"])
def test_every_connection_opens_with_the_url_form(pg_cluster, form: str) -> None:
    name = empty_database(pg_cluster, f"vl_url_{form.replace('-', '_')}")
    url = url_forms(pg_cluster, name)[form]
    db = Database(url, pool_size=1)
    try:
        db.create_all()  # the migrations, from an empty database (crashed on '%')
        assert current(db.engine) is not None
        with db.read() as s:  # the pool
            assert s.execute(text("SELECT current_database()")).scalar() == name
        listener = listen_connection(db, "vl_url_test")  # the LISTEN connection
        try:
            sender = db.raw_connection()  # the NOTIFY connection (``Notifier``)
            sender.autocommit = True
            with sender.cursor() as cur:
                cur.execute("SELECT pg_notify('vl_url_test', 'hello')")
            sender.close()
            deadline = time.monotonic() + 5
            while not listener.notifies and time.monotonic() < deadline:
                if select.select([listener], [], [], 0.5)[0]:
                    listener.poll()
            assert [n.payload for n in listener.notifies] == ["hello"]
        finally:
            listener.close()
        assert "***" in db.display_url or "p%" not in url
        assert "p%25w" not in db.display_url
    finally:
        db.dispose()


def test_every_connection_carries_keepalives_and_timeouts(pg_cluster) -> None:
    db = Database(pg_cluster.new_database(), pool_size=1)
    try:
        with db.read() as s:
            pooled = s.connection().connection.dbapi_connection
            shown = [s.execute(text(f"SHOW {k}")).scalar() for k in ("statement_timeout", "lock_timeout")]
            params = pooled.get_dsn_parameters()  # type: ignore[union-attr]
        assert shown == ["30s", "10s"], shown
        raw = listen_connection(db, "vl_any")
        try:
            with raw.cursor() as cur:
                cur.execute("SHOW statement_timeout")
                assert cur.fetchone()[0] == "30s"
            raw_params = raw.get_dsn_parameters()
        finally:
            raw.close()
        for got in (params, raw_params):
            assert got.get("keepalives") == "1" and got.get("keepalives_idle") == "5", got
            assert got.get("tcp_user_timeout") == "10000" and got.get("connect_timeout") == "5", got
    finally:
        db.dispose()


def test_the_cli_migrates_with_an_encoded_password(pg_cluster) -> None:
    """What ``controller cluster`` and ``db upgrade`` do at start-up, as a process: on main the
    migration runner crashed on the '%' (alembic's ConfigParser interpolation)."""
    import subprocess
    import sys

    name = empty_database(pg_cluster, "vl_url_cli")
    url = url_forms(pg_cluster, name)["percent-password"]
    out = subprocess.run(
        [sys.executable, "-m", "viplanes.cli.main", "db", "upgrade", "--db", url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and "schema at" in out.stdout, (out.stdout, out.stderr)
    assert "vl_pct:***@" in out.stdout and "p%25w" not in out.stdout + out.stderr
