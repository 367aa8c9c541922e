"""Sample a running ``viplanes serve`` with py-spy (if installed) and summarise where time goes.

py-spy sees every thread (the API server's workers, os-ken's event and socket threads, the scheduler), which
cProfile cannot. ``--profile`` on ``run_all`` attaches it during the churn benchmark; the summary
goes into the result's details and the raw collapsed stacks next to the JSON.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

_FRAME = re.compile(r"^(?P<func>[^ ]+) \((?P<file>[^:]+)(?::(?P<line>\d+))?\)$")


def py_spy() -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


class Sampler:
    """``py-spy record --format raw`` on a pid, in the background, until ``stop``."""

    def __init__(self, pid: int, out: Path, duration_s: float, rate_hz: int = 200) -> None:
        self.out = out
        exe = py_spy()
        self.proc: subprocess.Popen | None = None
        if exe is None:
            return
        out.parent.mkdir(parents=True, exist_ok=True)
        # BENCH_PYSPY_NATIVE=1: C frames too (the cyclic GC shows up as gc_collect_main)
        native = ["--native"] if os.environ.get("BENCH_PYSPY_NATIVE") else []
        # BENCH_PYSPY_GIL=1: only the thread holding the GIL (a proxy for Python CPU, no waits);
        # still non-blocking: pausing ~300 threads per sample got ~10 samples/s and slowed serve
        gil = ["--gil"] if os.environ.get("BENCH_PYSPY_GIL") else []
        self.proc = subprocess.Popen(
            [
                exe,
                "record",
                "--pid",
                str(pid),
                "--duration",
                str(int(duration_s) + 1),
                "--rate",
                str(rate_hz),
                "--format",
                "raw",
                "--threads",
                *native,
                *gil,
                *([] if native else ["--nonblocking"]),
                "--output",
                str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> dict[str, Any] | None:
        """Stop sampling now (py-spy writes its output on SIGINT) and summarise."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        if not self.out.exists():
            return None
        return summarize(self.out.read_text(errors="replace"))


def _short(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    path = m.group("file")
    for marker in ("site-packages/", "/work/main/", "python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{m.group('func')} ({path})"


IDLE = (
    "wait (threading.py)",
    "select (selectors.py)",
    "get (queue.py)",
    "accept (socket.py)",
    "recv",
    "_wait_for_tstate_lock",
    "sleep",
    "poll (selectors.py)",
    "handler_thread",
    "readinto (socket.py)",
    "wait (pending.py)",
)


def _package_of(frame: str) -> str:
    """'do_execute (sqlalchemy/engine/default.py)' -> 'sqlalchemy'; our folders by name."""
    path = frame.rpartition("(")[2].rstrip(")")
    head = path.split("/", 1)[0] if "/" in path else "stdlib"
    return head if not head.endswith(".py") else "stdlib"


def summarize(raw: str, top: int = 25) -> dict[str, Any]:
    """Collapsed stacks ('a;b;c N' per line) -> busy samples per function (self and inclusive)."""
    self_time: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = busy = 0
    for line in raw.splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        n = int(count_s)
        total += n
        frames = [_short(f) for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith("thread (") and not f.startswith("process ")]
        if not frames:
            continue
        leaf = frames[-1]
        if any(leaf.startswith(i) or i in leaf for i in IDLE):
            continue
        busy += n
        self_time[leaf] += n
        for f in set(frames):
            incl[f] += n
    by_package: Counter[str] = Counter()
    for f, n in self_time.items():
        by_package[_package_of(f)] += n
    return {
        "samples": total,
        "busy_samples": busy,
        "by_package": by_package.most_common(),
        "self": [(f, n) for f, n in self_time.most_common(top)],
        "inclusive": [(f, n) for f, n in incl.most_common(top * 2)],
    }
