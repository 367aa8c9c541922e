"""Load beside a benchmark: ``python -m bench.run_all --busy N`` runs N processes that only spin.

Issue 44 asks for figures "at load 4-8" on the 2-core machine. The load average other work on a
shared machine happens to bring is no condition a command can reproduce; N spinning processes
add N to the load average (each always runnable) and take their share of both cores from the
benchmark's own processes, at the same priority. They are this process's children, killed by
their PIDs when the block ends (never by name: the machine's other work has Python processes too).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

SPIN = "while True:\n    pass\n"


@contextlib.contextmanager
def busy(workers: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``workers`` spinning processes for the block's length (none for 0)."""
    procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(max(workers, 0))]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait(timeout=10)
