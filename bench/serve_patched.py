"""``viplanes`` CLI with experimental patches applied first, to measure a proposed change before
proposing it: ``BENCH_PATCH=sqlite_writer_lock python -m bench.serve_patched serve ...``.

Patches (comma-separated in $BENCH_PATCH):
- ``sqlite_writer_lock``: SQLite write transactions queue on one in-process lock instead of
  SQLite's busy handler, which sleeps 1, 2, 5, 10 ... 100 ms between retries of BEGIN IMMEDIATE.
- ``switch_interval``: ``sys.setswitchinterval(0.0005)``.
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Iterator


def sqlite_writer_lock() -> None:
    from viplanes import db as dbmod

    original = dbmod.Database.write
    lock = threading.RLock()

    @contextlib.contextmanager
    def write(self: Any) -> Iterator[Any]:
        if not self.is_sqlite:
            with original(self) as s:
                yield s
            return
        with lock, original(self) as s:
            yield s

    dbmod.Database.write = write  # type: ignore[method-assign]


def switch_interval() -> None:
    """Hand the GIL over every 0.5 ms instead of 5 ms: a thread woken by a barrier reply or a
    socket waits less for a busy one."""
    import sys

    sys.setswitchinterval(0.0005)


PATCHES = {"sqlite_writer_lock": sqlite_writer_lock, "switch_interval": switch_interval}


def main() -> None:
    for name in filter(None, os.environ.get("BENCH_PATCH", "").split(",")):
        PATCHES[name]()
    from viplanes.cli import main as cli

    cli()


if __name__ == "__main__":
    main()
