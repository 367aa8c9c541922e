"""`viplanes transfer` under SIGTERM at every phase: no lane is left held, no CMD is orphaned.

Each test raises the signal at one exact point (by wrapping the call that marks the phase) in
this very process, where `transfer` has installed its handlers. A guard handler stands in for the
default action, so a signal that escapes the wrapper fails the test instead of killing pytest.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.live import LiveServer
from tests.support.world import World
from viplanes.cli import transfer as transfer_mod
from viplanes.client.http import ApiClient


class Escaped(Exception):
    pass


@pytest.fixture(autouse=True)
def guard() -> Iterator[Any]:
    def escaped(signum: int, _frame: Any) -> None:
        raise Escaped(f"signal {signum} reached the default handler")

    before = signal.signal(signal.SIGTERM, escaped)
    try:
        yield escaped
        assert signal.getsignal(signal.SIGTERM) is escaped  # the wrapper put the handler back
    finally:
        signal.signal(signal.SIGTERM, before)


def run(live: LiveServer, world: World, mark: Path, *cmd: str) -> Any:
    return CliRunner().invoke(
        transfer_mod.transfer,
        [
            "--api-url",
            live.url,
            "--token",
            world.tokens["alice"],
            "--src",
            "10.1.0.10",
            "--dst",
            "203.0.113.10",
            "--dst-ports",
            "9100",
            "--",
            *(cmd or ("sh", "-c", f"touch {mark}")),
        ],
    )


def the_lane(world: World) -> dict[str, Any]:
    [lane] = world.client.get("/api/v1/lanes", headers=world.h("alice")).get_json()
    return lane


def test_sigterm_while_waiting_for_the_lane(
    live: LiveServer, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = ApiClient.wait_lane

    def wait_then_signal(self: ApiClient, lane: dict[str, Any], timeout_s: float, poll_s: float = 0.25) -> Any:
        signal.raise_signal(signal.SIGTERM)
        return original(self, lane, timeout_s, poll_s)

    monkeypatch.setattr(ApiClient, "wait_lane", wait_then_signal)
    r = run(live, world, tmp_path / "ran")
    assert r.exit_code == 128 + signal.SIGTERM, r.output
    assert "SIGTERM before the command started" in r.stderr and not (tmp_path / "ran").exists()
    assert the_lane(world)["state"] == "released"


def test_sigterm_while_the_request_is_answered(
    live: LiveServer, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server made the lane; the signal lands before the answer is read. The answer is still
    read, so the lane it names is released rather than left to its lease."""
    original = ApiClient.request_lane

    def answered_then_signal(self: ApiClient, body: dict[str, Any], key: str | None = None) -> Any:
        answer = original(self, body, key)
        signal.raise_signal(signal.SIGTERM)
        return answer

    monkeypatch.setattr(ApiClient, "request_lane", answered_then_signal)
    r = run(live, world, tmp_path / "ran")
    assert r.exit_code == 128 + signal.SIGTERM, r.output
    assert not (tmp_path / "ran").exists()
    lane = the_lane(world)
    assert lane["state"] == "released" and f"lane {lane['id']} released" in r.stderr


def test_sigterm_as_the_command_starts_reaches_it(
    live: LiveServer, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lane active, CMD being started: the signal waits for CMD and is forwarded to it."""
    real_popen = subprocess.Popen

    def signal_then_start(*args: Any, **kwargs: Any) -> Any:
        signal.raise_signal(signal.SIGTERM)
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(transfer_mod.subprocess, "Popen", signal_then_start)
    began = time.monotonic()
    r = run(live, world, tmp_path / "ran", "sleep", "30")
    assert r.exit_code == 128 + signal.SIGTERM, r.output  # sleep died of the forwarded signal
    assert time.monotonic() - began < 15
    assert the_lane(world)["state"] == "released"


def test_sigterm_after_the_command_ended_does_not_stop_the_release(
    live: LiveServer, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = ApiClient.call

    def stats_then_signal(self: ApiClient, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        answer = original(self, method, path, *args, **kwargs)
        if path.endswith("/stats"):
            signal.raise_signal(signal.SIGTERM)
        return answer

    monkeypatch.setattr(ApiClient, "call", stats_then_signal)
    r = run(live, world, tmp_path / "ran", "sh", "-c", "exit 4")
    assert r.exit_code == 4, r.output
    assert the_lane(world)["state"] == "released"


def test_a_signal_while_the_renewal_thread_starts_still_releases() -> None:
    """Seen in CI: SIGTERM landed inside ``Thread.start`` (waiting for the renew thread to run),
    and ``release`` then raised "cannot join thread before it is started": exit 1 with a
    traceback instead of 143 and a released lane. An unstarted thread is not joined now."""
    from viplanes.client.http import ApiClient, LaneLease
    from viplanes.config import ClientConfig

    lease = LaneLease(ApiClient(ClientConfig(api_url="http://127.0.0.1:9", token="t")), {"src_ip": "10.1.0.10"})
    lease._thread = threading.Thread(target=lease._renew, daemon=True)  # created, never started
    assert lease.release() is None  # nothing to release yet; no RuntimeError
    lease._thread.start()  # had it started after all: it sees the stop and ends at once
    lease._thread.join(2)
    assert not lease._thread.is_alive()
