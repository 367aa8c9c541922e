"""A throwaway PostgreSQL 15 cluster for the test session (never the system cluster).

initdb + pg_ctl run as the ``postgres`` OS user in a temporary directory owned by it, listening on
127.0.0.1 on a free port with its socket in that directory. One cluster per pytest session (the
``pg_cluster`` fixture in tests/conftest.py), stopped and removed at its end.
Each test gets its own database cloned from a migrated template.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.procs import free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")


class PgCluster:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="viplanes-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self._names = itertools.count(1)
        self.template_ready = False

    def _run(self, *args: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *args], check=True, capture_output=True, timeout=60, cwd="/")

    def start(self) -> None:
        shutil.chown(self.dir, "postgres", "postgres")
        self._run(
            str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"
        )
        self.start_server()

    def start_server(self) -> None:
        """pg_ctl start on the existing data directory (first start, or after ``stop_server``)."""
        opts = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        self._run(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            opts,
            "-l",
            str(self.dir / "server.log"),
            "-w",
            "-t",
            "30",
            "start",
        )

    def stop_server(self) -> None:
        """pg_ctl stop -m fast: every session is cut, the data stays (a restart fault)."""
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def _admin(self, sql: str) -> None:
        import psycopg2

        conn = psycopg2.connect(self.url())
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
        finally:
            conn.close()

    def empty_database(self) -> str:
        """A fresh database with no schema at all (the upgrade tests migrate it step by step)."""
        name = f"vl_empty_{os.getpid()}_{next(self._names)}"
        self._admin(f"CREATE DATABASE {name}")
        return self.url(name)

    def new_database(self) -> str:
        """A fresh database with the schema at head (cloned from a template migrated once)."""
        if not self.template_ready:
            from sqlalchemy import create_engine

            from viplanes.store.db import resolve_db_url
            from viplanes.store.migrations import upgrade

            self._admin("DROP DATABASE IF EXISTS vl_template")
            self._admin("CREATE DATABASE vl_template")
            engine = create_engine(resolve_db_url(self.url("vl_template")))
            upgrade(engine)
            engine.dispose()
            self.template_ready = True
        name = f"vl_test_{os.getpid()}_{next(self._names)}"
        self._admin(f"CREATE DATABASE {name} TEMPLATE vl_template")
        return self.url(name)


@contextmanager
def session_cluster() -> Iterator[PgCluster]:
    """A started cluster, stopped and removed on exit; skips where PostgreSQL 15 or root is missing."""
    if not (PG_BIN / "pg_ctl").exists():
        pytest.skip("PostgreSQL 15 binaries not installed")
    if os.geteuid() != 0:
        pytest.skip("starting a PostgreSQL cluster as user postgres needs root")
    cluster = PgCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
