"""PostgreSQL write transactions whose BEGIN rides in the message of their first statement.

psycopg2 sends BEGIN as a message of its own before a transaction's first statement: one round
trip that carries nothing, of the 6 a lane request made before its switches were told (issue 44;
``tests/integration/test_pg_round_trips.py`` counts them). Here the connection is in psycopg2's
autocommit, so the driver sends no BEGIN, and the first statement goes as ``BEGIN; <statement>``
in one simple-query message: PostgreSQL runs both in order and psycopg2 keeps the last result,
the statement's own (rows, rowcount, errors). COMMIT and ROLLBACK are sent here, as psycopg2
would have sent them; statements still riding at the end go with the COMMIT. A transaction that
runs no statement sends nothing at all.

A statement whose rows nobody reads (a lock) can ride too (``ride``): it goes in the same
message, after BEGIN and before the next statement. In READ COMMITTED each statement of a
message takes its own snapshot, so a read that follows a lock in one message sees every row
committed by whoever held the lock before (``tests/integration/test_pg_gather.py``).

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
_RIDERS = "viplanes_riders"  # Connection.info: complete statements to send before the next one


def install(engine: Engine) -> None:
    """Prefix a pending BEGIN to the next statement. Registered after ``prepared.install``, so
    the text it prefixes is the one sent (``EXECUTE vl_N(...)`` once prepared)."""

    @event.listens_for(engine, "before_cursor_execute", retval=True)
    def _ride(conn, _cursor, statement, parameters, _context, executemany):  # type: ignore[no-untyped-def]
        info = conn.info
        if executemany or not (info.get(_PENDING) or info.get(_RIDERS)):
            return statement, parameters
        riders = info.pop(_RIDERS, None) or []
        if parameters is not None:  # psycopg2 interpolates the whole text: a rider's % must stay one
            riders = [r.replace("%", "%%") for r in riders]
        if info.get(_PENDING):
            info[_PENDING] = False
            riders.insert(0, "BEGIN")
        return "; ".join([*riders, statement]), parameters


def ride(conn: Connection, statement: str) -> None:
    """Send ``statement`` (complete: its values inlined, ``Connection.connection`` mogrified) in the
    message of this transaction's next statement, before it. Its rows are not read; an error in
    it fails that next statement, as its own would. Only inside ``transaction``."""
    if _PENDING not in conn.info:
        raise RuntimeError("pgbegin.ride outside a pgbegin.transaction")
    conn.info.setdefault(_RIDERS, []).append(statement)


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
        if info.get(_PENDING) is False:
            _roll_back(conn)
        raise
    else:
        if info.get(_PENDING) is False or info.get(_RIDERS):
            try:  # riders still queued (an INSERT left for the end) go in the COMMIT's message
                conn.exec_driver_sql("COMMIT")
            except BaseException:
                # a rider failed: PostgreSQL skipped the rest of the message, COMMIT included,
                # and holds the transaction open and aborted
                if not conn.invalidated and in_transaction(cast(Any, conn.connection).dbapi_connection):
                    _roll_back(conn)
                raise
    finally:
        info.pop(_PENDING, None)
        info.pop(_RIDERS, None)


def _roll_back(conn: Connection) -> None:
    if conn.invalidated:
        return
    try:
        conn.exec_driver_sql("ROLLBACK")
    except Exception:
        log.warning("ROLLBACK failed: the connection is dropped", exc_info=True)
        conn.invalidate()


def in_transaction(dbapi_connection: Any) -> bool:
    """The server holds a transaction open on this psycopg2 connection (whatever its autocommit)."""
    return cast(int, dbapi_connection.get_transaction_status()) != 0  # TRANSACTION_STATUS_IDLE
