"""PostgreSQL write transactions whose BEGIN rides in the message of their first statement.

psycopg2 sends BEGIN as a message of its own before a transaction's first statement: one round
trip that carries nothing, of the 6 a lane request made before its switches were told (issue 44;
``tests/integration/test_pg_round_trips.py`` counts them). Here the connection is in psycopg2's
autocommit, so the driver sends no BEGIN, and the first statement goes as ``BEGIN; <statement>``
in one simple-query message: PostgreSQL runs both in order and psycopg2 keeps the last result,
the statement's own (rows, rowcount, errors). COMMIT and ROLLBACK are sent here, as psycopg2
would have sent them. A transaction that runs no statement sends nothing at all.

The server's transaction status (libpq's, ``get_transaction_status``), not psycopg2's autocommit
flag, says whether a statement runs inside a transaction (``prepared.py``'s savepoint).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any, cast

from sqlalchemy import Connection, Engine, event

log = logging.getLogger(__name__)

_PENDING = "viplanes_begin_pending"  # Connection.info: BEGIN not sent yet (True), sent (False)


def install(engine: Engine) -> None:
    """Prefix a pending BEGIN to the next statement. Registered after ``prepared.install``, so
    the text it prefixes is the one sent (``EXECUTE vl_N(...)`` once prepared)."""

    @event.listens_for(engine, "before_cursor_execute", retval=True)
    def _ride(conn, _cursor, statement, parameters, _context, executemany):  # type: ignore[no-untyped-def]
        if conn.info.get(_PENDING) and not executemany:
            conn.info[_PENDING] = False
            return f"BEGIN; {statement}", parameters
        return statement, parameters


@contextlib.contextmanager
def transaction(conn: Connection) -> Iterator[Connection]:
    """One write transaction on ``conn`` (psycopg2 in autocommit: ``Database.statement_connection``):
    committed when the block ends, rolled back when it raises. A failed ROLLBACK (the connection
    lost) invalidates the connection, so the pool never hands out one left inside a transaction."""
    info = conn.info  # the pooled connection's: read once, an invalidated Connection would reconnect
    info[_PENDING] = True
    try:
        yield conn
    except BaseException:
        if info.get(_PENDING) is False and not conn.invalidated:
            try:
                conn.exec_driver_sql("ROLLBACK")
            except Exception:
                log.warning("ROLLBACK failed: the connection is dropped", exc_info=True)
                conn.invalidate()
        raise
    else:
        if info.get(_PENDING) is False:
            conn.exec_driver_sql("COMMIT")
    finally:
        info.pop(_PENDING, None)


def in_transaction(dbapi_connection: Any) -> bool:
    """The server holds a transaction open on this psycopg2 connection (whatever its autocommit)."""
    return cast(int, dbapi_connection.get_transaction_status()) != 0  # TRANSACTION_STATUS_IDLE
