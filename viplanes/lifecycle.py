"""Run a long-lived command until it is told to stop (SIGTERM or Ctrl-C), then clean up."""

from __future__ import annotations

import signal
import subprocess
import threading


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
