"""Tokens, roles and the failed-authentication limiter."""

from __future__ import annotations

import hashlib

from viplanes.authz.tokens import Caller, hash_token, may, new_token, parse_bearer, sees_lane
from viplanes.store.ratelimit import Budgets, FailedAuthLimiter, scopes_of


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


def _limiter(url: str, now: list[float], **budgets: int) -> FailedAuthLimiter:
    from viplanes.store.db import Database

    db = Database(url)
    db.create_all()
    return FailedAuthLimiter(
        db,
        Budgets(**{"per_address": 3, "per_network": 100, "overall": 1000, "window_s": 60, **budgets}),
        clock=lambda: now[0],
    )


def test_limiter_fixed_window(db_url):
    now = [6000.0]
    lim = _limiter(db_url, now)
    for _ in range(2):
        lim.record_failure("1.2.3.4")
    assert lim.retry_after("1.2.3.4") == 0
    lim.record_failure("1.2.3.4")
    assert lim.retry_after("1.2.3.4") == 60
    assert lim.retry_after("5.6.7.8") == 0  # per client address
    now[0] = 6030
    assert lim.retry_after("1.2.3.4") == 30
    now[0] = 6060.5  # the next window starts empty
    assert lim.retry_after("1.2.3.4") == 0


def test_limiter_is_shared_by_processes_through_the_database(db_url):
    """Two limiters (two API processes) on one database share the budget; a third, started
    later (a restart), still sees it."""
    now = [6000.0]
    a, b = _limiter(db_url, now), _limiter(db_url, now)
    a.record_failure("1.2.3.4")
    a.record_failure("1.2.3.4")
    assert b.retry_after("1.2.3.4") == 0
    b.record_failure("1.2.3.4")
    assert a.retry_after("1.2.3.4") > 0 and _limiter(db_url, now).retry_after("1.2.3.4") > 0


def test_limiter_network_and_global_budgets_stop_address_rotation(sqlite_url):
    now = [6000.0]
    lim = _limiter(sqlite_url, now, per_network=5, overall=8)
    for i in range(5):
        lim.record_failure(f"10.0.0.{i}")
    assert lim.retry_after("10.0.0.200") > 0  # same /24, fresh address
    assert lim.retry_after("10.0.1.1") == 0
    for i in range(3):
        lim.record_failure(f"10.0.{i + 2}.1")
    assert lim.retry_after("192.0.2.1") > 0  # the overall budget is spent
    assert scopes_of("2001:db8::1") == ["addr:2001:db8::1", "net:2001:db8::/64", "all"]


def test_limiter_prunes_old_windows(sqlite_url):
    from sqlalchemy import func, select

    from viplanes.store.models import AuthFailureCount

    now = [6000.0]
    lim = _limiter(sqlite_url, now)
    for i in range(50):
        lim.record_failure(f"10.0.{i}.1")
    now[0] += 300
    lim.record_failure("10.9.9.9")
    with lim.db.read() as s:
        assert s.scalar(select(func.count()).select_from(AuthFailureCount)) == 3  # only the new window
