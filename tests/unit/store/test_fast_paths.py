"""The speed-ups from issue 6 keep their promises: SQLite writers queue in-process, the token cache
never lets a rotated or disabled token through, and quota counting skips grants that cannot apply."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import event

from tests.support.clock import T0
from viplanes.authz.tokencache import TOKENS, TokenCache
from viplanes.authz.tokens import Caller
from viplanes.store import records as store
from viplanes.store.db import Database

# --- SQLite writer lock ------------------------------------------------------------------------


def test_sqlite_writers_wait_in_python_without_holding_a_connection(sqlite_url):
    db = Database(sqlite_url, pool_size=4)
    db.create_all()
    checkouts: list[str] = []
    event.listen(db.engine, "checkout", lambda *_: checkouts.append(threading.current_thread().name))
    inside, release, second_done = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with db.write() as s:
            store.create_principal(s, "first", "operator", T0)
            inside.set()
            release.wait(5)

    def second() -> None:
        with db.write() as s:
            store.create_principal(s, "second", "operator", T0)
        second_done.set()

    a = threading.Thread(target=first, name="w1")
    b = threading.Thread(target=second, name="w2")
    try:
        a.start()
        assert inside.wait(5)
        b.start()
        assert not second_done.wait(0.3)  # still queued behind the first writer ...
        assert "w2" not in checkouts  # ... on the Python lock, not inside SQLite's busy handler
    finally:
        release.set()
        a.join(5)
        b.join(5)
    assert second_done.is_set() and "w2" in checkouts
    with db.read() as s:
        assert {p.name for p in store.list_principals(s)} == {"first", "second"}
    db.dispose()


def test_writer_lock_is_released_after_a_failed_transaction(sqlite_url):
    db = Database(sqlite_url)
    db.create_all()
    with pytest.raises(RuntimeError), db.write() as s:
        store.create_principal(s, "gone", "operator", T0)
        raise RuntimeError("boom")
    done = threading.Event()

    def other() -> None:
        with db.write() as s:
            store.create_principal(s, "kept", "operator", T0)
        done.set()

    threading.Thread(target=other).start()
    assert done.wait(5)
    with db.read() as s:
        assert [p.name for p in store.list_principals(s)] == ["kept"]
    db.dispose()


# --- token cache -------------------------------------------------------------------------------


def _count_lookups(monkeypatch) -> list[str]:
    from viplanes.api import auth

    calls: list[str] = []
    real = auth.caller_for_token

    def counting(s, token):
        calls.append(token)
        return real(s, token)

    monkeypatch.setattr(auth, "caller_for_token", counting)
    return calls


def test_repeat_requests_authenticate_from_the_cache(world, monkeypatch):
    calls = _count_lookups(monkeypatch)
    for _ in range(3):
        assert world.client.get("/api/v1/whoami", headers=world.h("alice")).status_code == 200
    assert calls == [world.tokens["alice"]]


def test_rotated_token_fails_on_the_very_next_request(world):
    h_old = world.h("bob")
    assert world.client.get("/api/v1/whoami", headers=h_old).status_code == 200  # now cached
    r = world.client.post("/api/v1/principals/bob/rotate", headers=world.h("root"))
    assert r.status_code == 200
    assert world.client.get("/api/v1/whoami", headers=h_old).status_code == 401
    new = {"Authorization": f"Bearer {r.json['token']}"}
    assert world.client.get("/api/v1/whoami", headers=new).json["name"] == "bob"


def test_disabled_principal_fails_on_the_very_next_request(world):
    h = world.h("alice")
    assert world.client.get("/api/v1/lanes", headers=h).status_code == 200  # now cached
    assert world.client.post("/api/v1/principals/alice/disable", headers=world.h("root")).status_code == 200
    assert world.client.get("/api/v1/lanes", headers=h).status_code == 401
    assert world.client.get("/api/v1/whoami", headers=world.h("bob")).status_code == 200


def test_store_level_rotate_invalidates_after_commit(world):
    """A rotation through the store (not the API) in this process also takes effect at once."""
    db = world.app.extensions["viplanes"].db
    h_old = world.h("bob")
    assert world.client.get("/api/v1/whoami", headers=h_old).status_code == 200
    with db.write() as s:
        store.rotate_token(s, "bob", T0)
        # a request racing the uncommitted rotation may still see the old row ...
        assert world.client.get("/api/v1/whoami", headers=h_old).status_code == 200
    # ... but it must not have left the old answer cached once the rotation committed
    assert world.client.get("/api/v1/whoami", headers=h_old).status_code == 401


def test_lookup_racing_an_invalidation_does_not_store_its_answer():
    cache = TokenCache(ttl_s=60)
    bob = Caller(id=2, name="bob", role="researcher")
    loads: list[int] = []

    def load_then_rotated() -> Caller:
        loads.append(1)
        cache.invalidate()  # the token was rotated while this lookup was reading the old row
        return bob

    assert cache.lookup("db", "tok", load_then_rotated) == bob
    assert len(cache) == 0
    assert cache.lookup("db", "tok", lambda: None) is None  # the database says no: no stale hit


def test_cache_entries_expire_and_unknown_tokens_are_not_cached():
    now = [100.0]
    cache = TokenCache(ttl_s=5, clock=lambda: now[0])
    bob = Caller(id=2, name="bob", role="researcher")
    assert cache.lookup("db", "tok", lambda: bob) == bob
    assert cache.lookup("db", "tok", lambda: None) == bob  # served from memory
    now[0] += 5.01
    assert cache.lookup("db", "tok", lambda: None) is None  # expired: asked the database again
    assert cache.lookup("db", "nope", lambda: None) is None and len(cache) == 0
    assert TokenCache(ttl_s=0).lookup("db", "tok", lambda: None) is None  # ttl 0 = off


def test_the_process_cache_is_the_one_the_api_uses(world):
    TOKENS.invalidate()
    world.client.get("/api/v1/whoami", headers=world.h("root"))
    assert len(TOKENS) == 1


# --- quota counted only where it can matter ------------------------------------------------------


def test_live_lanes_are_counted_only_for_grants_that_pass_every_other_check(world, monkeypatch):
    root = world.h("root")
    other = world.client.post(
        "/api/v1/grants",
        headers=root,
        json={
            "principal": "alice",
            "src_prefixes": ["10.1.0.0/24"],
            "dst_prefixes": ["203.0.113.0/24"],
            "protocols": ["udp"],
            "ports": ["5000"],
            "max_duration_s": 60,
            "max_lanes": 1,
        },
    ).json["id"]
    asked: list[list[int]] = []
    import viplanes.lanes.admit as manager_module  # count_live (SQLite) calls it

    real = manager_module.live_counts

    def spy(s, grant_ids, *args, **kw):
        asked.append(list(grant_ids))
        return real(s, grant_ids, *args, **kw)

    monkeypatch.setattr(manager_module, "live_counts", spy)
    for port in (9000, 9001, 9002):
        assert world.lane("alice", dst_port=port).status_code == 201
    r = world.lane("alice", dst_port=9003)  # the tcp grant is full; the udp one does not apply
    assert r.status_code == 409 and r.json["error"] == "quota_exceeded"
    assert r.json["details"]["grant_id"] == world.grants["alice"]
    assert asked and all(ids == [world.grants["alice"]] for ids in asked)
    assert other not in {g for ids in asked for g in ids}
