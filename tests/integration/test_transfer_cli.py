"""`viplanes transfer` against a real `viplanes serve --dataplane memory` (no OVS needed).

Checks what a researcher relies on: CMD's exit code comes back, the lane is released within 2 s of
CMD's exit, a SIGTERM to the wrapper reaches CMD and releases the lane, and a SIGKILLed wrapper's
lane ends by itself at the end of its lease.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.support.serve import VIPLANES, bootstrap, memory_serve, setup_researcher
from viplanes.lab.servechild import ServeChild

pytestmark = pytest.mark.integration


def ts(iso: str) -> float:
    return dt.datetime.fromisoformat(iso).timestamp()


@pytest.fixture
def served(tmp_path: Path):
    db = f"sqlite:///{tmp_path / 'transfer.db'}"
    op = bootstrap(db)
    serve = memory_serve(db, tmp_path).start()
    try:
        yield serve, setup_researcher(serve.url, op, max_lanes=5)
    finally:
        serve.stop()


def wrapper(serve: ServeChild, token: str, port: int | str, *cmd: str, lease: int = 60) -> subprocess.Popen:
    env = {**os.environ, "VIPLANES_API_URL": serve.url, "VIPLANES_TOKEN": token}
    return subprocess.Popen(
        [
            *VIPLANES,
            "transfer",
            "--src",
            "10.1.0.10",
            "--dst",
            "203.0.113.10",
            "--dst-ports",
            str(port),
            "--lease",
            str(lease),
            "--",
            *cmd,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def lane_of(serve: ServeChild, token: str, port: int | str) -> dict:
    lanes = requests.get(f"{serve.url}/api/v1/lanes", headers={"Authorization": f"Bearer {token}"}, timeout=10).json()
    return next(ln for ln in lanes if ln["dst_ports"] == [str(port)])


def wait_active(serve: ServeChild, token: str, port: int, proc: subprocess.Popen, timeout: float = 20) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            lane = lane_of(serve, token, port)
            if lane["state"] == "active":
                return lane
        except StopIteration:
            pass
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError("lane never became active")


def test_exit_code_and_release_within_2s(served, tmp_path: Path) -> None:
    serve, token = served
    mark = tmp_path / "cmd-ended"
    proc = wrapper(serve, token, "9100-9131", "sh", "-c", f"sleep 1; date +%s.%N > {mark}; exit 3")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    lane = lane_of(serve, token, "9100-9131")
    assert lane["match_count"] == 4  # 9100-9103, 9104-9119, 9120-9127, 9128-9131
    assert lane["state"] == "released", lane
    cmd_ended = float(mark.read_text())
    assert 0 <= ts(lane["ended_at"]) - cmd_ended < 2.0, (lane["ended_at"], cmd_ended)
    assert "released" in err and "mean" in err


def test_sigterm_reaches_cmd_and_releases(served) -> None:
    serve, token = served
    proc = wrapper(serve, token, 9101, "sleep", "60")
    wait_active(serve, token, 9101, proc)
    sent = time.time()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    # 143 both when sleep died of the forwarded SIGTERM and when the signal came before sleep started
    assert proc.returncode == 128 + signal.SIGTERM, err
    lane = lane_of(serve, token, 9101)
    assert lane["state"] == "released" and ts(lane["ended_at"]) - sent < 2.0, lane


def test_killed_wrapper_lane_ends_with_its_lease(served) -> None:
    serve, token = served
    proc = wrapper(serve, token, 9102, "sleep", "8", lease=5)  # the orphaned sleep ends by itself
    lane = wait_active(serve, token, 9102, proc)
    proc.kill()  # no chance to release
    proc.wait(10)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and lane["state"] == "active":
        time.sleep(0.25)
        lane = lane_of(serve, token, 9102)
    assert lane["state"] == "expired", lane
    assert ts(lane["ended_at"]) - ts(lane["activated_at"]) <= 5 + 1 + 1  # lease + one renewal + a tick
