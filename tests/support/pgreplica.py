"""A PostgreSQL primary and its streaming replica for fail-over tests (never the system cluster).

``replica_pair`` starts a primary (initdb, as ``tests/support/postgres.py`` does), copies it with
``pg_basebackup -R`` (the copy starts as a hot standby that streams the primary's WAL) and starts
the copy on a port of its own. The primary runs ``synchronous_commit=on`` with
``synchronous_standby_names='*'``: a commit is acknowledged once the replica has flushed it, so a
fail-over loses no lane a client was told about (docs/operating.md says why production does the
same). ``crash_primary`` (``pg_ctl stop -m immediate``) and ``promote`` make the fail-over.

``url(db)`` is the libpq multi-host URL every process of the test uses:
``postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/db?target_session_attrs=read-write``, so
whichever of the two accepts writes is the one they reach.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.support.postgres import PG_BIN, PgCluster

SYNC = "-c synchronous_commit=on -c synchronous_standby_names='*'"


class PgNode(PgCluster):
    """A PgCluster whose server takes extra ``-c`` settings (they come last, so they win)."""

    def __init__(self, extra: str = "") -> None:
        super().__init__()
        self.extra = extra

    def start_server(self) -> None:
        opts = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off "
            f"-c full_page_writes=off -c max_connections=300 {self.extra}"
        )
        self._run(
            str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.dir / "server.log"), "-w", "start"
        )


class ReplicaPair:
    """``primary`` and ``replica``; ``new_database`` hands out multi-host URLs (the scale-out
    fixture calls it as it calls a PgCluster's)."""

    def __init__(self) -> None:
        self.primary = PgNode(SYNC)
        self.replica = PgNode()

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
        self.primary._run(str(PG_BIN / "pg_ctl"), "-D", str(self.primary.data), "-m", "immediate", "-w", "stop")

    def promote(self) -> None:
        self.replica._run(str(PG_BIN / "pg_ctl"), "-D", str(self.replica.data), "-w", "promote")

    def stop(self) -> None:
        for node in (self.replica, self.primary):
            node.stop()


@contextmanager
def replica_pair() -> Iterator[ReplicaPair]:
    if not (PG_BIN / "pg_basebackup").exists():
        pytest.skip("PostgreSQL 15 binaries not installed")
    if os.geteuid() != 0:
        pytest.skip("starting PostgreSQL clusters as user postgres needs root")
    pair = ReplicaPair()
    try:
        pair.start()
        yield pair
    finally:
        pair.stop()
