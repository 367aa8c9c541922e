"""Engine and transactions. SQLite (WAL) by default, PostgreSQL when the URL says so.

Write transactions must be serialised where a quota is checked. PostgreSQL does it with
``SELECT ... FOR UPDATE`` on the grant rows (see ``lock``); SQLite has no row locks, so every write
transaction starts with ``BEGIN IMMEDIATE``, which takes the database's single writer lock up
front instead of failing with SQLITE_BUSY when a read transaction later tries to write.

Inside one process SQLite writers also queue on an in-process lock (``Database.write``) before
``BEGIN IMMEDIATE``: SQLite's own busy handler sleeps 1, 2, 5, 10 ... 100 ms between retries, so
under load some writers wait 100 ms while others pass (the 0.3-0.5 s p99 in docs/benchmarks.md).
A Python lock wakes the next writer at once and in order. Other processes (and other ``Database``
objects on the same file) still meet the busy handler, which remains the cross-process guard.

PostgreSQL sessions end a transaction left idle for ``IDLE_IN_TRANSACTION_S`` (the server's
``idle_in_transaction_session_timeout``, set once per connection). A process frozen mid-transaction
(SIGSTOP, a paused VM, a swapped-out worker) otherwise keeps its row and advisory locks for as long
as the freeze lasts; the grant lock every lane request takes would stall every request of the
cluster behind one frozen API worker (kill -9 does not: the socket closes and PostgreSQL rolls
back at once). No transaction of ours waits on anything but the database while open (names are
resolved and switches written outside them), so 10 s is far above any legitimate idle spell.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from sqlalchemy import URL, Connection, CursorResult, Engine, Executable, create_engine, event, make_url, text
from sqlalchemy.exc import ArgumentError, DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

from viplanes.settings import DEFAULTS
from viplanes.settings.environ import environment_value
from viplanes.store import pgbegin, pgconnect
from viplanes.store.filemode import create_private, sqlite_file
from viplanes.store.lanesql import prepared as pg_prepare
from viplanes.store.lanesql import sqlite as rawsql
from viplanes.store.pgconnect import PgSettings
from viplanes.store.sqlite_wal import BACKSTOP_PAGES, BUSY_TIMEOUT_MS, JOURNAL_SIZE_LIMIT, WalCheckpointer

DEFAULT_DB_URL = DEFAULTS.text("VIPLANES_DB_URL")  # ./viplanes.db, relative to the working directory
_ADVISORY_LOCK = text("SELECT pg_advisory_xact_lock(:k)")
# two locks in one round trip, taken left to right (PostgreSQL evaluates a target list in order)
_ADVISORY_LOCKS_2 = text("SELECT pg_advisory_xact_lock(:k), pg_advisory_xact_lock(:k2)")
IDLE_IN_TRANSACTION_S = 10.0


def resolve_db_url(url: str | None = None) -> str:
    """Explicit URL > $VIPLANES_DB_URL > ./viplanes.db. A bare path means a SQLite file."""
    url = url or environment_value("VIPLANES_DB_URL") or DEFAULT_DB_URL
    if "://" not in url:
        url = f"sqlite:///{Path(url)}"
    for plain in ("postgres://", "postgresql://"):
        # SQLAlchemy 2.1 picks psycopg 3 for a bare postgresql:// URL; we ship psycopg2
        if url.startswith(plain):
            url = "postgresql+psycopg2://" + url[len(plain) :]
    return url


def make_engine(
    url: str,
    pool_size: int = 10,
    idle_in_transaction_s: float = IDLE_IN_TRANSACTION_S,
    settings: PgSettings | None = None,
) -> Engine:
    """SQLite, or PostgreSQL through ``pgconnect`` (``settings``: its per-connection bounds)."""
    url = resolve_db_url(url)
    if url.startswith("sqlite"):
        _create_private_file(url)
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 60},
            pool_size=pool_size,
            max_overflow=20,
            pool_timeout=60,
        )
        _sqlite_setup(engine)
        return engine
    settings = settings or PgSettings(idle_in_transaction_s=idle_in_transaction_s)
    # libpq parses the URL (multi-host, target_session_attrs, %-escapes): ``pgconnect``
    engine = create_engine(
        _engine_url(url),
        creator=functools.partial(pgconnect.connect, url, settings),
        pool_size=pool_size,
        max_overflow=30,
        pool_timeout=60,
    )
    _ping_idle_connections(engine)
    if engine.dialect.driver == "psycopg2":
        pg_prepare.install(engine)  # PostgreSQL stops parsing and planning the hot statements
        pgbegin.install(engine)  # after it: a write's BEGIN rides with its first EXECUTE
    return engine


def _create_private_file(url: str) -> None:
    """The SQLite file made 0600 before SQLite creates it 0644 (``viplanes.store.filemode``)."""
    path = sqlite_file(make_url(url).database)
    if path is not None:
        with contextlib.suppress(FileNotFoundError):  # no such directory: SQLite's own error says so
            create_private(path)


def _engine_url(url: str) -> str | URL:
    """What SQLAlchemy keeps as ``engine.url`` (its dialect, logs, tools): the URL where it can
    parse it, else the bare driver (a multi-host URL). Connections never use it (``creator``)."""
    try:
        return make_url(url)
    except (ValueError, ArgumentError):
        return "postgresql+psycopg2://"


PING_IDLE_S = 0.5  # a pooled connection idle longer than this is pinged before it is lent


def is_outage(exc: BaseException) -> bool:
    """A lost or unreachable database (a crash, a fail-over, a connection reset under a pooled
    connection), not a bug and not an answer: callers wait and read again, or answer 503, and
    judge nothing on it. A connection checked in under ``PING_IDLE_S`` ago is not pinged, so
    the first statement after a primary's crash meets "connection already closed" here."""
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    if isinstance(exc, DBAPIError):
        return exc.connection_invalidated
    return isinstance(exc, _raw_outages())  # the raw driver's, from statements run on its cursor


def outage_text(exc: BaseException) -> str:
    """An outage's first line for a reason or a log (its class when the driver gave no text)."""
    return (str(exc).splitlines() or [type(exc).__name__])[0]


@functools.cache
def _raw_outages() -> tuple[type[BaseException], ...]:
    """psycopg2's own lost-connection errors: the prepared lane statements
    (``store/lanesql/prepared.py``) run on the driver's cursor, where SQLAlchemy wraps nothing;
    a fail-over there raised a bare ``psycopg2.InterfaceError: connection already closed``."""
    import psycopg2

    return (psycopg2.OperationalError, psycopg2.InterfaceError)


def _ping_idle_connections(engine: Engine) -> None:
    """``pool_pre_ping`` only for connections that sat in the pool: ``pool_pre_ping=True`` costs a
    ``SELECT 1`` round trip at every checkout (~5 per lane request+release, a sixth of all the
    statements). A connection handed back under half a second ago was working then; a server
    restart takes longer than that, so connections from before it are idle longer and pinged. A
    failed ping makes the pool replace the connection (``DisconnectionError``), as pre-ping did."""

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_conn: Any, record: ConnectionPoolEntry) -> None:
        record.info["checked_in_at"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_conn: Any, record: ConnectionPoolEntry, _proxy: PoolProxiedConnection) -> None:
        last = record.info.get("checked_in_at")
        if last is not None and time.monotonic() - last < PING_IDLE_S:
            return
        try:  # the dialect's ping: psycopg2's runs in autocommit, leaving no transaction open
            engine.dialect.do_ping(dbapi_conn)
        except Exception as exc:
            raise DisconnectionError(str(exc)) from exc


def _sqlite_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: ConnectionPoolEntry) -> None:  # pysqlite's connection
        dbapi_conn.isolation_level = None  # pysqlite must not BEGIN on its own; we do below
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across app crashes
        # checkpoints run in WalCheckpointer's thread; a commit checkpoints only past this backstop
        cur.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
        cur.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")  # the -wal file shrinks back
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get("sqlite_immediate", False)
        rawsql.execute_text(conn, "BEGIN IMMEDIATE" if immediate else "BEGIN")


def updated_rows(session: Session | Connection, statement: Executable) -> int:
    """Rows an UPDATE/DELETE matched. ``Session.execute`` is typed as returning ``Result``; for
    DML it is a ``CursorResult``, the one that has ``rowcount``."""
    return cast(CursorResult[Any], session.execute(statement)).rowcount


def _in_transaction(conn: Connection) -> bool:
    """Whether the SQLite connection under ``conn`` still has a transaction open (its own
    commit or rollback failed); True when that cannot be asked."""
    try:
        return bool(conn.connection.dbapi_connection.in_transaction)  # type: ignore[union-attr]
    except Exception:
        return True


class Database:
    """One engine, one session factory; ``read()`` and ``write()`` are single transactions."""

    def __init__(
        self,
        url: str | None = None,
        pool_size: int = 10,
        idle_in_transaction_s: float = IDLE_IN_TRANSACTION_S,
        settings: PgSettings | None = None,
    ) -> None:
        self.url = resolve_db_url(url)
        self.pg_settings = settings or PgSettings(idle_in_transaction_s=idle_in_transaction_s)
        self.engine = make_engine(self.url, pool_size=pool_size, settings=self.pg_settings)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        # re-entrant: a nested write in the same thread would otherwise deadlock on this lock
        # instead of failing the way it does without it (SQLITE_BUSY after busy_timeout)
        self._writer_lock = threading.RLock() if self.is_sqlite else None
        self._kept_writer: Connection | None = None  # SQLite: write_connection's own connection
        in_memory = self.engine.url.database in (None, "", ":memory:")
        self._checkpointer = WalCheckpointer(self.engine) if self.is_sqlite and not in_memory else None

    @contextlib.contextmanager
    def read(self) -> Iterator[Session]:
        with self._sessions() as session, session.begin():
            yield session

    @contextlib.contextmanager
    def read_connection(self) -> Iterator[Connection]:
        """A bare Connection for one read statement. On PostgreSQL in autocommit: the statement
        is its own transaction, one round trip instead of BEGIN + statement + COMMIT."""
        if self.is_sqlite:
            with self.engine.connect() as conn, conn.begin():
                yield conn
            return
        with self.statement_connection() as conn:
            yield conn

    @contextlib.contextmanager
    def statement_connection(self) -> Iterator[Connection]:
        """PostgreSQL: a Connection in autocommit, where each statement is its own transaction
        (a write too: one data-modifying statement is atomic; ``viplanes/store/lanesql/postgres.py``)."""
        if self.is_sqlite:
            raise RuntimeError("statement_connection is for PostgreSQL; SQLite writes go through write()")
        with self._autocommit() as conn:
            yield conn

    @contextlib.contextmanager
    def _autocommit(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            # psycopg2's own switch, client-side: SQLAlchemy's isolation_level="AUTOCOMMIT" resets
            # the level on checkin with a SET statement, a round trip of its own
            raw = cast(Any, conn.connection).dbapi_connection
            raw.autocommit = True
            try:
                yield conn
            finally:
                if not raw.closed:  # invalidated (a lost connection, a stale plan): the error stands
                    raw.autocommit = False

    @contextlib.contextmanager
    def write(self) -> Iterator[Session]:
        if self._writer_lock is None:  # PostgreSQL: row locks (``lock_usable_grants``) serialise
            with self._write() as session:
                yield session
            return
        with self._writer_lock, self._write() as session:
            yield session
        if self._checkpointer is not None:
            self._checkpointer.written()

    @contextlib.contextmanager
    def write_connection(self) -> Iterator[Connection]:
        """``write()`` on a bare Connection, no ORM Session: the lane hot path runs only Core
        statements, and a Session's set-up and commit bookkeeping cost ~0.05 ms per transaction.

        SQLite: one Connection kept for these transactions. They run one at a time under the
        writer lock anyway, and a pool checkout + checkin (events, reset) cost ~0.1-0.2 ms of each
        (perf_counter stamps: "write connection asked" -> "transaction open" 0.28 ms). A
        connection that was invalidated or closed is replaced at the next transaction, and one
        whose COMMIT failed is closed too: SQLite may keep that transaction open (SQLITE_BUSY), and
        every later BEGIN on it failed ("cannot start a transaction within a transaction")."""
        if self._writer_lock is None:
            if self.engine.dialect.driver != "psycopg2":
                with self.engine.connect() as conn, conn.begin():
                    yield conn
                return
            # PostgreSQL: BEGIN rides with the first statement, one round trip less (``pgbegin``)
            with self._autocommit() as conn, pgbegin.transaction(conn):
                yield conn
            return
        with self._writer_lock:
            kept = self._kept_writer
            if kept is None or kept.closed or kept.invalidated:
                kept = self._kept_writer = self.engine.connect()
                kept.execution_options(sqlite_immediate=True)  # read by the "begin" listener
            try:
                with kept.begin():
                    yield kept
            except BaseException:
                if not (kept.closed or kept.invalidated) and _in_transaction(kept):
                    # closes the DBAPI connection and its transaction; the next write replaces
                    # an invalidated ``kept`` (above), as it replaces a closed one
                    kept.invalidate()
                raise
        if self._checkpointer is not None:
            self._checkpointer.written()

    @contextlib.contextmanager
    def _write(self) -> Iterator[Session]:
        with self._sessions() as session, session.begin():
            if self.is_sqlite:  # procure the connection now so its BEGIN is IMMEDIATE
                session.connection(execution_options={"sqlite_immediate": True})
            yield session

    def create_all(self) -> None:
        """Bring the schema to the newest migration (alembic), creating it if needed."""
        from viplanes.store.migrations import upgrade

        upgrade(self.engine)

    def advisory_lock(self, session: Session | Connection, key: int, then: int | None = None) -> None:
        """Serialise one kind of decision across principals (PostgreSQL; SQLite is already serial).
        ``then``: a second key, locked after ``key`` in the same statement (one round trip)."""
        if not self.is_sqlite:
            if then is None:
                session.execute(_ADVISORY_LOCK, {"k": key})
            else:
                session.execute(_ADVISORY_LOCKS_2, {"k": key, "k2": then})

    @property
    def display_url(self) -> str:
        """The URL for logs and status lines, password hidden."""
        return pgconnect.redact(self.url)

    def raw_connection(self) -> Any:
        """PostgreSQL: a psycopg2 connection of its own, outside the pool (LISTEN, NOTIFY), with
        the pool's bounds and the URL as given."""
        if self.is_sqlite:
            raise RuntimeError("raw_connection is for PostgreSQL")
        return pgconnect.connect(self.url, self.pg_settings)

    def dispose(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        if self._writer_lock is not None:
            with self._writer_lock:
                if self._kept_writer is not None:
                    self._kept_writer.close()
                    self._kept_writer = None
        self.engine.dispose()
