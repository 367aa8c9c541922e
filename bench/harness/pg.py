"""A throwaway PostgreSQL cluster for ``--db postgresql`` runs (never the system cluster).

initdb + pg_ctl as the ``postgres`` OS user in a temporary directory, listening on 127.0.0.1 on a
free port; stopped and removed on exit. Durability is off (fsync, synchronous_commit): the point is
how the store behaves with real row locks instead of SQLite's single writer, not disk speed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bench.harness.server import free_port

PG_BIN_GLOB = "/usr/lib/postgresql/*/bin"


def pg_bin() -> Path:
    found = sorted(Path("/").glob(PG_BIN_GLOB.lstrip("/")))
    if not found:
        raise RuntimeError("PostgreSQL server binaries not found (apt-get install postgresql)")
    return found[-1]


def _as_postgres(*args: str) -> None:
    out = subprocess.run(
        ["runuser", "-u", "postgres", "--", *args], capture_output=True, text=True, timeout=60, cwd="/"
    )
    if out.returncode != 0:
        raise RuntimeError(f"{Path(args[0]).name}: {out.stderr.strip()[-500:]}")


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str]:
    """Yields a database URL; the cluster and its files are gone afterwards."""
    bindir = pg_bin()
    workdir = Path(tempfile.mkdtemp(prefix="viplanes-bench-pg-"))
    data = workdir / "data"
    port = free_port()
    shutil.chown(workdir, "postgres", "postgres")
    started = False
    try:
        _as_postgres(
            str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"
        )
        opts = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k {workdir} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        if os.environ.get("BENCH_PG_LOG"):  # count round trips: every statement, with its backend
            opts += " -c log_statement=all -c log_line_prefix=%p:"
        if os.environ.get("BENCH_PG_DURATIONS"):  # each statement with its own time on the server
            opts += " -c log_min_duration_statement=0 -c log_line_prefix=%p:"
        opts += os.environ.get("BENCH_PG_EXTRA", "")
        _as_postgres(
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            opts,
            "-l",
            str(workdir / "server.log"),
            "-w",
            "-t",
            "30",
            "start",
        )
        started = True
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        if started:
            with contextlib.suppress(Exception):
                _as_postgres(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
            for knob in ("BENCH_PG_LOG", "BENCH_PG_DURATIONS"):
                if os.environ.get(knob):
                    with contextlib.suppress(OSError):
                        shutil.copy(workdir / "server.log", os.environ[knob])
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def database(kind: str, workdir: Path) -> Iterator[str]:
    """``sqlite`` -> a file in ``workdir``; ``postgresql`` -> a throwaway cluster."""
    if kind == "postgresql":
        with throwaway_postgres() as url:
            yield url
    else:
        yield f"sqlite:///{workdir / 'bench.db'}"
