"""Tokens, roles and the failed-authentication limiter."""
from __future__ import annotations

import hashlib

from viplanes.authz.ratelimit import FailedAuthLimiter
from viplanes.authz.tokens import Caller, hash_token, may, new_token, parse_bearer, sees_lane


def test_tokens_are_random_and_stored_as_sha256():
    a, b = new_token(), new_token()
    assert a != b and len(a) > 40 and a.startswith("vl_")
    assert hash_token(a) == hashlib.sha256(a.encode()).hexdigest() and a not in hash_token(a)


def test_parse_bearer():
    assert parse_bearer("Bearer abc") == "abc"
    assert parse_bearer("bearer  abc ") == "abc"
    for bad in (None, "", "Basic abc", "Bearer", "Bearer " + "x" * 300, "abc"):
        assert parse_bearer(bad) is None


def test_roles_and_ownership():
    op, r1 = Caller(1, "root", "operator"), Caller(2, "alice", "researcher")
    for action in ("grant.create", "grant.revoke", "principal.create", "audit.read", "lane.revoke"):
        assert may(op, action) and not may(r1, action)
    assert may(r1, "lane.request") and may(r1, "lane.release")
    assert sees_lane(op, 2) and sees_lane(r1, 2) and not sees_lane(r1, 3)


def test_limiter_sliding_window():
    now = [0.0]
    lim = FailedAuthLimiter(max_failures=3, window_s=60, clock=lambda: now[0])
    for _ in range(2):
        lim.record_failure("1.2.3.4")
    assert lim.retry_after("1.2.3.4") == 0
    lim.record_failure("1.2.3.4")
    assert 59 <= lim.retry_after("1.2.3.4") <= 60
    assert lim.retry_after("5.6.7.8") == 0  # per client address
    now[0] = 30
    assert 29 <= lim.retry_after("1.2.3.4") <= 30
    now[0] = 60.5  # the first failures slid out of the window
    assert lim.retry_after("1.2.3.4") == 0


def test_limiter_memory_is_bounded():
    now = [0.0]
    lim = FailedAuthLimiter(max_failures=2, window_s=10, clock=lambda: now[0], max_clients=100)
    for i in range(1000):
        lim.record_failure(f"10.0.{i // 256}.{i % 256}")
    assert len(lim._failures) <= 100
