"""`lane request --wait` and the `transfer` lease honour Retry-After, within one bounded wait.

A real HTTP server (stdlib, a thread) answers 503 switches_not_ready with Retry-After, then 201.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from click.testing import CliRunner

from viplanes.cli.main import main
from viplanes.client.http import ApiClient, ApiError, LaneLease
from viplanes.config import ClientConfig

LANE = {"id": 7, "state": "active", "src_ip": "10.1.0.10", "dst_ip": "203.0.113.10", "starts_at": None}


class Script:
    """What the fake API answers to each POST /lanes, in order; the last answer repeats."""

    def __init__(self, answers: list[tuple[int, dict[str, str], dict[str, Any]]]) -> None:
        self.answers, self.seen_keys, self.times = answers, [], []

    def next(self) -> tuple[int, dict[str, str], dict[str, Any]]:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


NOT_READY = (503, {"Retry-After": "1"}, {"error": "switches_not_ready", "message": "the data plane is not ready"})


@pytest.fixture
def api() -> Iterator[tuple[str, Script]]:
    script = Script([NOT_READY])

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            script.seen_keys.append(self.headers.get("Idempotency-Key"))
            script.times.append(time.monotonic())
            status, headers, body = script.next()
            self._answer(status, headers, body)

        def do_GET(self) -> None:
            self._answer(200, {}, LANE)

        def _answer(self, status: int, headers: dict[str, str], body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            for k, v in {**headers, "Content-Type": "application/json", "Content-Length": str(len(data))}.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", script
    finally:
        server.shutdown()
        server.server_close()


def _request(url: str, *extra: str) -> Any:
    args = ["lane", "request", "--src", "10.1.0.10", "--dst", "203.0.113.10", "--dst-port", "5201"]
    env = {"VIPLANES_API_URL": url, "VIPLANES_TOKEN": "t", "VIPLANES_CONFIG": "/nonexistent"}
    return CliRunner().invoke(main, [*args, "--purpose", "x", *extra], env=env)


def test_wait_retries_after_retry_after_then_gets_the_lane(api):
    url, script = api
    script.answers = [NOT_READY, (201, {}, LANE)]
    r = _request(url, "--wait")
    assert r.exit_code == 0, r.output
    assert len(script.times) == 2 and script.times[1] - script.times[0] >= 0.9  # waited Retry-After
    assert script.seen_keys[0] and script.seen_keys[0] == script.seen_keys[1]  # one lane, never two


def test_wait_is_bounded_by_wait_timeout(api):
    url, script = api  # never ready
    t0 = time.monotonic()
    r = _request(url, "--wait", "--wait-timeout", "2")
    assert r.exit_code == 1 and "switches_not_ready" in r.stderr
    assert time.monotonic() - t0 < 4 and 2 <= len(script.times) <= 4


def test_without_wait_one_request(api):
    url, script = api
    r = _request(url)
    assert r.exit_code == 1 and len(script.times) == 1


def test_retry_after_is_parsed_and_garbage_ignored(api):
    url, script = api
    client = ApiClient(ClientConfig(api_url=url, token="t"))
    for header, want in (("1", 1.0), ("Wed, 21 Oct 2015 07:28:00 GMT", None), ("99999", None)):
        script.answers = [(503, {"Retry-After": header}, {"error": "x", "message": "m"})]
        with pytest.raises(ApiError) as info:
            client.request_lane({})
        assert info.value.retry_after_s == want


def test_transfer_lease_waits_too(api):
    url, script = api
    script.answers = [NOT_READY, (201, {}, LANE)]
    lease = LaneLease(ApiClient(ClientConfig(api_url=url, token="t")), {"src_ip": "10.1.0.10"}, wait_s=5)
    try:
        assert lease.start()["state"] == "active" and len(script.times) == 2
    finally:
        lease.release()
