"""`viplanes api --workers N` never leaves a worker behind: a parent killed with SIGKILL (the OOM
killer, a `kill -9`, a test's teardown) takes its workers with it, and the port is free again.
Before, the workers lived on as orphans holding the port (SO_REUSEPORT let a new API share it with
the old code) and retrying their LISTEN connection every second."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.procs import free_port, port_free, wait_for, wait_healthy

pytestmark = pytest.mark.integration


def _children(pid: int) -> set[int]:
    kids: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids |= {int(k) for k in (task / "children").read_text().split()}
    return kids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_killed_api_parent_takes_its_workers_and_frees_the_port(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "api.log"
    with open(log, "ab") as out:
        api = subprocess.Popen(
            [sys.executable, "-m", "viplanes.cli.main", "api", "--db", f"sqlite:///{tmp_path}/lanes.db",
             "--listen", f"127.0.0.1:{port}", "--workers", "2"],
            stdout=out, stderr=out,
        )  # fmt: skip
    workers: set[int] = set()
    try:
        wait_healthy(api, f"http://127.0.0.1:{port}", log, timeout=90)
        assert wait_for(lambda: len(_children(api.pid)) == 2, 30), _children(api.pid)
        workers = _children(api.pid)
        os.kill(api.pid, signal.SIGKILL)
        api.wait(10)
        gone = wait_for(lambda: not any(_alive(w) for w in workers), 15)
        assert gone, f"workers {sorted(w for w in workers if _alive(w))} outlived their killed parent"
        assert wait_for(lambda: port_free(port), 10), f"port {port} still held after the workers ended"
    finally:
        for pid in [api.pid, *workers]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
