"""Run a long-lived command until it is told to stop (SIGTERM or Ctrl-C), then clean up; and
children that never outlive the process that started them."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def wait_until_stopped() -> None:
    """Block until SIGTERM or SIGINT; the caller's ``finally`` does the cleanup. Call from the
    main thread (signal handlers can only be set there)."""
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        done.wait()
    except KeyboardInterrupt:
        pass


def stop_process(proc: subprocess.Popen | None, grace_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``: a child that ignores the polite signal must still
    not outlive the lab, test or benchmark that started it."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def die_with_parent(parent: int, signum: int = signal.SIGKILL) -> Callable[[], None]:
    """A ``preexec_fn`` (or a call right after ``fork``): the child gets ``signum`` when its parent
    dies (Linux ``PR_SET_PDEATHSIG``), so a killed server leaves no collector or API worker behind
    holding its port; a parent already gone before the call (the race the signal cannot cover)
    ends the child at once. Linux sends the signal when the *thread* that forked exits: fork only
    from a thread that lives as long as the child should."""

    def preexec() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec
