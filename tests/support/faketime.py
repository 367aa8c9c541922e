"""Step the wall clock of one child process while it runs: libfaketime (Debian ``faketime``).

The child reads its offset from a file on every clock call (``FAKETIME_TIMESTAMP_FILE`` with
``FAKETIME_NO_CACHE=1``), so a test writes ``+3600`` and the process's ``time.time()`` jumps an
hour, as ``date -s`` or an NTP step would do to the whole machine. ``CLOCK_MONOTONIC`` is left
alone (``FAKETIME_DONT_FAKE_MONOTONIC=1``), as the kernel leaves it across a real step.

One quirk of libfaketime 0.9.10 with an unfaked monotonic clock: ``clock_nanosleep`` on
``CLOCK_MONOTONIC`` with an absolute deadline (Python 3.11's ``time.sleep``) fails with EINVAL. The
child therefore runs through ``SHIM``, which makes ``time.sleep`` wait on a never-set
``threading.Event`` (a ``pthread_cond_timedwait`` on the monotonic clock, which libfaketime passes
through); nothing else of the program changes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")

SHIM = (
    "import sys, threading, time\n"
    "_never = threading.Event()\n"
    "def _sleep(seconds):\n"
    "    if seconds < 0:\n"
    "        raise ValueError('sleep length must be non-negative')\n"
    "    _never.wait(seconds)\n"
    "time.sleep = _sleep\n"
    "from viplanes.cli.main import main\n"
    "sys.argv[0] = 'viplanes'\n"
    "main()\n"
)


def available() -> bool:
    return LIB.exists()


class SteppedClockFile:
    """The offset file a child under libfaketime reads; ``step`` moves its wall clock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(f"{self.offset:+d}\n")
        os.replace(tmp, self.path)  # the child never reads half a line

    def step(self, seconds: int) -> None:
        self.offset += seconds
        self._write()

    def env(self) -> dict[str, str]:
        """The child's environment: ours plus libfaketime reading this file."""
        return {
            **os.environ,
            "LD_PRELOAD": str(LIB),
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }


def viplanes_command(*args: str) -> list[str]:
    """``viplanes ARGS`` through the sleep shim (see the module docstring)."""
    return [sys.executable, "-c", SHIM, *args]
