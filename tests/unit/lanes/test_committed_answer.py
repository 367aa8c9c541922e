"""A lane request that committed is answered as granted, never 503 "try again" (issue 41): on a
full PostgreSQL disk the lane's row committed, the next write failed, the client got 503 and a
retry without an Idempotency-Key made a second lane. Faults injected at the commit boundary of
the real request path (the API, the lane manager, the store on SQLite)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Connection, func, select
from sqlalchemy.exc import OperationalError

from tests.support.world import World
from viplanes.lanes import activation
from viplanes.store.models import Lane

DISK_FULL = OperationalError("UPDATE lanes", {}, Exception('could not extend file "base/16384/16417": No space left'))


def lanes_in_db(world: World) -> int:
    with world.app.extensions["viplanes"].db.read() as s:
        return int(s.scalar(select(func.count()).select_from(Lane)) or 0)


def test_activation_not_recorded_answers_the_committed_lane(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*_: Any) -> bool:
        raise DISK_FULL

    monkeypatch.setattr(activation, "record_activation", full)
    r = world.lane()
    assert r.status_code == 201, (r.status_code, r.get_json())
    assert r.get_json()["state"] == "installing" and lanes_in_db(world) == 1
    monkeypatch.undo()
    retry = world.lane()  # the client retries without an Idempotency-Key: no second lane
    assert retry.status_code == 409 and lanes_in_db(world) == 1, retry.get_json()


def test_a_commit_that_raised_after_reaching_the_server_answers_the_lane(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = world.app.extensions["viplanes"].db
    real = db.write_connection
    calls = {"n": 0}

    @contextlib.contextmanager
    def commit_then_lose_the_connection() -> Iterator[Connection]:
        calls["n"] += 1
        with real() as conn:
            yield conn
        if calls["n"] == 1:  # the insert's transaction: committed, but the client library raised
            raise OperationalError("COMMIT", {}, Exception("server closed the connection unexpectedly"))

    monkeypatch.setattr(db, "write_connection", commit_then_lose_the_connection)
    r = world.lane()
    assert r.status_code == 201, (r.status_code, r.get_json())
    assert r.get_json()["state"] == "active" and lanes_in_db(world) == 1


def test_a_transaction_that_did_not_commit_is_still_503(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    db = world.app.extensions["viplanes"].db
    real = db.write_connection

    @contextlib.contextmanager
    def fail_before_commit() -> Iterator[Connection]:
        with real() as conn:
            yield conn
            raise DISK_FULL  # inside the transaction: rolled back

    monkeypatch.setattr(db, "write_connection", fail_before_commit)
    r = world.lane()
    assert r.status_code == 503 and lanes_in_db(world) == 0, r.get_json()
