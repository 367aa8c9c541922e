"""Run a long-lived command until it is told to stop (SIGTERM or Ctrl-C), then clean up."""
from __future__ import annotations

import signal
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
