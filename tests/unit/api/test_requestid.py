"""X-Request-ID: assigned per request, kept when well formed, replaced when not, and carried
from the HTTP request into the log line of the lane it created."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest

from viplanes.logs import setup_logging

FRESH = re.compile(r"[0-9a-f]{32}")


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    buf = io.StringIO()
    setup_logging("json", "INFO", buf)
    yield buf
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)


def records(buf: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def test_request_id_flows_into_the_log_line_of_the_lane_it_created(world, json_log):
    r = world.client.post(
        "/api/v1/lanes",
        json={
            "src_ip": "10.1.0.10",
            "dst_ip": "203.0.113.10",
            "protocol": "tcp",
            "dst_port": 9000,
            "duration_s": 600,
            "purpose": "sync",
        },
        headers={**world.h("alice"), "X-Request-ID": "proxy-7f3a2b"},
    )
    assert r.status_code == 201, r.json
    assert r.headers["X-Request-ID"] == "proxy-7f3a2b"
    granted = [rec for rec in records(json_log) if rec.get("lane_id") == r.json["id"]]
    assert granted, json_log.getvalue()
    assert granted[0]["request_id"] == "proxy-7f3a2b"
    assert granted[0]["principal"] == "alice"
    assert "granted to alice" in str(granted[0]["message"])


def test_each_request_without_an_id_gets_a_fresh_one(world):
    a = world.client.get("/api/v1/whoami", headers=world.h("alice")).headers["X-Request-ID"]
    b = world.client.get("/api/v1/whoami", headers=world.h("alice")).headers["X-Request-ID"]
    assert FRESH.fullmatch(a) and FRESH.fullmatch(b) and a != b


@pytest.mark.parametrize("garbage", ["x" * 500, "a b c", '{"level":"ERROR"}', "id;DROP TABLE lanes", "é-0001"])
def test_garbage_x_request_id_is_replaced_not_echoed(world, json_log, garbage):
    """The attack: a client picks the id to forge or flood log lines (or to impersonate another
    request's id with junk around it). It gets a fresh id; its value appears nowhere."""
    r = world.client.post(
        "/api/v1/lanes",
        json={
            "src_ip": "10.1.0.10",
            "dst_ip": "203.0.113.10",
            "protocol": "tcp",
            "dst_port": 9001,
            "duration_s": 60,
            "purpose": "sync",
        },
        headers={**world.h("alice"), "X-Request-ID": garbage},
    )
    assert r.status_code == 201, r.json
    rid = r.headers["X-Request-ID"]
    assert FRESH.fullmatch(rid)
    assert garbage not in json_log.getvalue()
    assert any(rec.get("request_id") == rid for rec in records(json_log))


def test_refused_requests_carry_an_id_too(world):
    r = world.client.get("/api/v1/lanes")  # no token: answered by auth's hook
    assert r.status_code == 401 and FRESH.fullmatch(r.headers["X-Request-ID"])


def test_a_request_leaves_no_principal_behind(world, json_log):
    """The same thread serves the next request (the API server reuses its threads): alice's name must not label it."""
    world.client.get("/api/v1/whoami", headers=world.h("alice"))
    logging.getLogger("viplanes.test").info("between requests")
    last = records(json_log)[-1]
    assert last["message"] == "between requests" and "principal" not in last and "request_id" not in last
