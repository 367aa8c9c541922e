"""Throwaway PostgreSQL 15 clusters for tests (never the system cluster): the session's one, and
a primary with its streaming replica for the fail-over tests.

initdb + pg_ctl run as the ``postgres`` OS user in a temporary directory owned by it, listening on
127.0.0.1 on a free port with its socket in that directory. One cluster per pytest session (the
``pg_cluster`` fixture in tests/conftest.py), stopped and removed at its end.
Each test gets its own database cloned from a migrated template.

``replica_pair`` starts a primary, copies it with ``pg_basebackup -R`` (the copy starts as a hot
standby that streams the primary's WAL) and starts the copy on a port of its own. The primary runs
``synchronous_commit=on`` with ``synchronous_standby_names='*'``: a commit is acknowledged once the
replica has flushed it, so a fail-over loses no lane a client was told about (docs/operating.md
says why production does the same). ``crash()`` (``pg_ctl stop -m immediate``) and ``promote()``
make the fail-over. ``ReplicaPair.url(db)`` is the libpq multi-host URL every process of the test
uses: ``postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/db?target_session_attrs=read-write``, so
whichever of the two accepts writes is the one they reach.
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

from tests.support.leftovers import SESSION_ENV
from tests.support.procs import free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")


# the session cluster's durability settings: a test database need not survive a crash
FAST = "-c synchronous_commit=off"
SYNC = "-c synchronous_commit=on -c synchronous_standby_names='*'"


class PgCluster:
    """One cluster; ``settings`` are more ``-c`` options, last so they win."""

    def __init__(self, settings: str = FAST) -> None:
        self.settings = settings
        self.dir = Path(tempfile.mkdtemp(prefix="viplanes-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self._names = itertools.count(1)
        self.template_ready = False

    def _run(self, *args: str) -> None:
        # pg_ctl's server outlives the test that (re)starts it and belongs to the session: it must
        # not carry the leftover check's tag (tests/support/leftovers.py)
        env = {k: v for k, v in os.environ.items() if k != SESSION_ENV}
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *args], check=True, capture_output=True, timeout=60, cwd="/", env=env
        )

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
            f"-c full_page_writes=off -c max_connections=300 {self.settings}"
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

    def crash(self) -> None:
        """pg_ctl stop -m immediate: the server dies as in a crash (WAL recovery on the next start)."""
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def promote(self) -> None:
        """A hot standby becomes a primary."""
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-w", "promote")

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


def _require(binary: str) -> None:
    if not (PG_BIN / binary).exists():
        pytest.skip("PostgreSQL 15 binaries not installed")
    if os.geteuid() != 0:
        pytest.skip("starting a PostgreSQL cluster as user postgres needs root")


@contextmanager
def session_cluster() -> Iterator[PgCluster]:
    """A started cluster, stopped and removed on exit; skips where PostgreSQL 15 or root is missing."""
    _require("pg_ctl")
    cluster = PgCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


class ReplicaPair:
    """``primary`` and ``replica``; ``new_database`` hands out multi-host URLs (the scale-out
    fixture calls it as it calls a PgCluster's)."""

    def __init__(self) -> None:
        self.primary = PgCluster(SYNC)
        self.replica = PgCluster("")

    def start(self) -> None:
        self.primary.start()
        shutil.chown(self.replica.dir, "postgres", "postgres")
        self.primary._run(
            str(PG_BIN / "pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.primary.port),
            "-U",
            "postgres",
            "-D",
            str(self.replica.data),
            "-R",
            "-X",
            "stream",
            "--no-sync",
            "--checkpoint=fast",
        )
        self.replica.start_server()  # standby.signal from -R: a hot standby streaming the WAL

    def url(self, db: str) -> str:
        return (
            f"postgresql://postgres@127.0.0.1:{self.primary.port},127.0.0.1:{self.replica.port}/{db}"
            "?target_session_attrs=read-write"
        )

    def new_database(self) -> str:
        single = self.primary.new_database()  # replicated: CREATE DATABASE goes through the WAL
        return self.url(single.rsplit("/", 1)[1])

    def crash_primary(self) -> None:
        self.primary.crash()

    def promote(self) -> None:
        self.replica.promote()

    def stop(self) -> None:
        for node in (self.replica, self.primary):
            node.stop()


@contextmanager
def replica_pair() -> Iterator[ReplicaPair]:
    _require("pg_basebackup")
    pair = ReplicaPair()
    try:
        pair.start()
        yield pair
    finally:
        pair.stop()
