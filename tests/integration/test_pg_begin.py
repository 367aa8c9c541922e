"""A PostgreSQL write whose BEGIN rides with its first statement (viplanes/store/pgbegin.py) is
still one transaction: nothing is seen before its COMMIT, an error rolls all of it back, and the
pooled connection comes back with no transaction open."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import DBAPIError

from viplanes.store.db import Database

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


@pytest.fixture
def db(pg_cluster) -> Iterator[Database]:
    d = Database(pg_cluster.new_database(), pool_size=1)  # one pooled connection, reused by every write
    with d.write_connection() as conn:
        conn.execute(text("CREATE TABLE begin_t (id int PRIMARY KEY)"))
    yield d
    d.dispose()


def _rows(db: Database) -> list[int]:
    with db.engine.connect() as other:  # a connection outside the pool's reuse: committed rows only
        return [r for (r,) in other.execute(text("SELECT id FROM begin_t ORDER BY id"))]


def _server_idle(conn: Any) -> bool:
    return conn.connection.dbapi_connection.get_transaction_status() == 0  # TRANSACTION_STATUS_IDLE


def test_nothing_is_seen_before_the_commit_and_begin_rides_with_the_first_statement(db) -> None:
    sent: list[str] = []

    def seen(_c: Any, _cur: Any, statement: str, *_: Any) -> None:
        if not statement.startswith("SELECT"):  # ``_rows``'s reads on another connection
            sent.append(statement.split("(", 1)[0].strip())

    event.listen(db.engine, "before_cursor_execute", seen)
    try:
        with db.write_connection() as conn:
            assert _server_idle(conn)
            conn.execute(text("INSERT INTO begin_t VALUES (1)"))
            conn.execute(text("INSERT INTO begin_t VALUES (2)"))
            assert _rows(db) == []  # a transaction: another session sees neither row yet
        with db.write_connection():
            pass  # no statement: nothing at all is sent
    finally:
        event.remove(db.engine, "before_cursor_execute", seen)
    assert _rows(db) == [1, 2]
    assert sent == ["BEGIN; INSERT INTO begin_t VALUES", "INSERT INTO begin_t VALUES", "COMMIT"], sent


def test_an_exception_in_the_block_rolls_back_and_leaves_no_transaction_open(db) -> None:
    with pytest.raises(ValueError), db.write_connection() as conn:
        conn.execute(text("INSERT INTO begin_t VALUES (1)"))
        raise ValueError("the caller changed its mind")
    with db.write_connection() as conn:  # the same pooled connection
        assert _server_idle(conn)
        conn.execute(text("INSERT INTO begin_t VALUES (2)"))
    assert _rows(db) == [2]


def test_a_failed_statement_rolls_back_the_earlier_ones(db) -> None:
    with pytest.raises(DBAPIError), db.write_connection() as conn:
        conn.execute(text("INSERT INTO begin_t VALUES (1)"))
        conn.execute(text("INSERT INTO begin_t VALUES (1)"))  # duplicate key: the transaction is aborted
    with db.write_connection() as conn:
        assert _server_idle(conn)
        conn.execute(text("INSERT INTO begin_t VALUES (3)"))
    assert _rows(db) == [3]
