"""A PostgreSQL write whose BEGIN rides with its first statement (viplanes/store/pgbegin.py) is
still one transaction: nothing is seen before its COMMIT, an error rolls all of it back, and the
pooled connection comes back with no transaction open."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import DBAPIError

from viplanes.store import pgbegin
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


def test_a_rider_goes_in_the_next_message_and_percent_signs_survive(db) -> None:
    sent: list[str] = []

    def seen(_c: Any, _cur: Any, statement: str, *_: Any) -> None:
        if "begin_t" in statement and not statement.startswith("SELECT id FROM begin_t"):
            sent.append(statement)

    event.listen(db.engine, "before_cursor_execute", seen)
    try:
        with db.write_connection() as conn:
            conn.execute(text("ALTER TABLE begin_t ADD COLUMN note text"))
            pgbegin.ride(conn, "INSERT INTO begin_t VALUES (1, '50%')")
            assert conn.execute(text("SELECT count(*) FROM begin_t WHERE id = :i"), {"i": 1}).scalar() == 1
            pgbegin.ride(conn, "INSERT INTO begin_t VALUES (2, '100%')")  # rides with the COMMIT
    finally:
        event.remove(db.engine, "before_cursor_execute", seen)
    with db.engine.connect() as other:
        assert list(other.execute(text("SELECT id, note FROM begin_t ORDER BY id"))) == [(1, "50%"), (2, "100%")]
    assert len(sent) == 3 and sent[1].startswith("INSERT INTO begin_t VALUES (1, '50%%'); SELECT count(*)"), sent
    assert sent[2] == "INSERT INTO begin_t VALUES (2, '100%%'); COMMIT", sent  # no parameters: psycopg2 still formats


def test_a_rider_that_fails_at_the_commit_rolls_back_all_and_leaves_no_transaction_open(db) -> None:
    with pytest.raises(DBAPIError), db.write_connection() as conn:
        conn.execute(text("INSERT INTO begin_t VALUES (1)"))
        pgbegin.ride(conn, "INSERT INTO begin_t VALUES (1)")  # duplicate key: PostgreSQL skips the COMMIT
    with db.write_connection() as conn:  # the same pooled connection
        assert _server_idle(conn)
        conn.execute(text("INSERT INTO begin_t VALUES (4)"))
    assert _rows(db) == [4]


def test_a_rider_outside_a_transaction_is_refused(db) -> None:
    with db.engine.connect() as conn, pytest.raises(RuntimeError, match="outside"):
        pgbegin.ride(conn, "SELECT 1")
