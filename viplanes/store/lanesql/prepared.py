"""Server-side prepared statements on psycopg2, which never prepares on its own.

psycopg2 sends every statement as text with its values inlined, so PostgreSQL parses and plans
each one at every request: ~0.65 ms of planning per lane cycle (EXPLAIN ANALYZE of the hot
statements, docs/benchmarks.md). psycopg 3 prepares by itself, but its Python layer costs the API
and the controller more CPU per statement than it saves PostgreSQL (measured: PostgreSQL -1.1 ms,
API +0.8, controller +0.3 ms per lane cycle). So psycopg2 stays and this module prepares:
the second time a connection runs a statement text it sends ``PREPARE vl_N AS <text with $1..>``
once, and from then on ``EXECUTE vl_N(<values>)`` (psycopg2 still inlines the values; the command
tag and the rows are those of the statement, so rowcount, RETURNING and errors are unchanged).

A statement PostgreSQL cannot prepare (a parameter whose type it cannot infer, ``$1 IS NULL``),
or one where a parameter would become text while the inlined value was typed by its form
(``SELECT $1`` with 2: the answer would be '2'), is remembered and sent as before. The PREPARE
runs inside a savepoint, so its failure never aborts the caller's transaction. Prepared statements belong to the server session: they survive a
rollback and die with the connection, and the pool's record info (where the names live) is
cleared when SQLAlchemy replaces a connection, so a reconnect starts afresh.

A prepared statement whose result columns change under it (``RETURNING *`` and an online
``ADD COLUMN``) fails with "cached plan must not change result type". That error is treated as
a lost connection: the pool drops its connections and with them every stale plan, the one
statement fails (the API answers 503, try again) and the next runs prepared afresh.
"""

from __future__ import annotations

import re
from typing import Any, cast

from psycopg2 import extensions
from sqlalchemy import Connection, Engine, event

from viplanes.store.pgbegin import in_transaction

PREPARE_AFTER = 2  # times one connection ran a text before it is prepared: one-offs stay plain
MAX_PREPARED = 256  # per connection: texts with inlined literals must not grow the set without end
_PARAM = re.compile(r"%\((\w+)\)s")
_PREPARABLE = ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH")
_STATE_KEY = "viplanes_prepared"
# a parameter PostgreSQL could give no type from its context: the inlined value typed it before
_UNTYPED = frozenset({"text", "unknown"})


class _Prepared:
    """One connection's statements: text -> ``EXECUTE`` text (None: not preparable), run counts."""

    __slots__ = ("executes", "seen")

    def __init__(self) -> None:
        self.executes: dict[str, str | None] = {}
        self.seen: dict[str, int] = {}


def prepared_form(statement: str, name: str, names: list[str]) -> tuple[str, str] | None:
    """``(PREPARE text, EXECUTE text)`` of a pyformat statement whose parameters are ``names``
    (in order of first use), or None if it is no plain DML."""
    if not statement.lstrip()[:6].upper().startswith(_PREPARABLE):
        return None
    position = {n: i + 1 for i, n in enumerate(names)}
    body = _PARAM.sub(lambda m: f"${position[m.group(1)]}", statement).replace("%%", "%")
    args = ", ".join(f"%({n})s" for n in names)
    return f"PREPARE {name} AS {body}", f"EXECUTE {name}({args})" if names else f"EXECUTE {name}"


def _prepare(cursor: Any, statement: str, name: str, parameters: dict[str, Any]) -> str | None:
    """PREPARE on the server (in a savepoint when in a transaction); the EXECUTE text or None."""
    names = list(dict.fromkeys(_PARAM.findall(statement)))
    form = prepared_form(statement, name, names)
    if form is None:
        return None
    prepare, execute = form
    # no transaction open on the server: nothing a failed PREPARE could abort (a write whose BEGIN
    # rides with its first statement is in autocommit too: ``viplanes/store/pgbegin.py``)
    autocommit = not in_transaction(cursor.connection)
    types = f"SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = '{name}'"
    try:
        cursor.execute(
            f"{prepare}; {types}"
            if autocommit
            else f"SAVEPOINT viplanes_prepare; {prepare}; RELEASE SAVEPOINT viplanes_prepare; {types}"
        )
        inferred = cursor.fetchone()[0]
    except Exception:
        if not autocommit:
            cursor.execute("ROLLBACK TO SAVEPOINT viplanes_prepare; RELEASE SAVEPOINT viplanes_prepare")
        return None
    if any(
        pg_type in _UNTYPED and not isinstance(parameters.get(n), (str, type(None)))
        for n, pg_type in zip(names, inferred, strict=True)
    ):
        # ``SELECT $1`` takes text where the inlined literal ``2`` was an integer: answers differ
        cursor.execute(f"DEALLOCATE {name}")
        return None
    return execute


STALE_PLAN = "cached plan must not change result type"


def is_stale_plan(error: BaseException) -> bool:
    """PostgreSQL refusing a prepared statement whose result shape changed (SQLSTATE 0A000)."""
    return getattr(error, "pgcode", None) == "0A000" and STALE_PLAN in str(error)


def install(engine: Engine) -> None:
    """Prepare the statements this engine repeats (psycopg2 only)."""

    @event.listens_for(engine, "handle_error")
    def _drop_stale_plans(context):  # type: ignore[no-untyped-def]
        if is_stale_plan(context.original_exception):
            context.is_disconnect = True  # the pool replaces its connections: plans die with them

    @event.listens_for(engine, "before_cursor_execute", retval=True)
    def _use_prepared(conn, cursor, statement, parameters, _context, executemany):  # type: ignore[no-untyped-def]
        if executemany or not isinstance(parameters, dict):
            return statement, parameters
        return _executable(conn.info, cursor, statement, parameters), parameters


def _executable(info: dict[Any, Any], cursor: Any, statement: str, parameters: dict[str, Any]) -> str:
    """The text to send for ``statement`` on this connection: its ``EXECUTE`` once prepared (at
    its ``PREPARE_AFTER``-th run), else the statement itself."""
    state = info.get(_STATE_KEY)
    if state is None:
        state = info[_STATE_KEY] = _Prepared()
    if statement in state.executes:
        execute = state.executes[statement]
        return execute if execute is not None else statement
    if len(state.seen) > 4 * MAX_PREPARED:  # one-off texts (inlined literals): forget them
        state.seen.clear()
    seen = state.seen[statement] = state.seen.get(statement, 0) + 1
    if seen < PREPARE_AFTER or len(state.executes) >= MAX_PREPARED:
        return statement
    del state.seen[statement]
    execute = state.executes[statement] = _prepare(cursor, statement, f"vl_{len(state.executes)}", parameters)
    return execute if execute is not None else statement


def inline(conn: Connection, statement: str, parameters: dict[str, Any]) -> str:
    """``statement`` (pyformat) as one complete text with ``parameters`` inlined by psycopg2, for
    ``pgbegin.ride``: prepared as the engine's hook would prepare it (``EXECUTE vl_N(...)`` from
    its second run on this connection)."""
    dbapi = cast(Any, conn.connection).dbapi_connection
    cursor = dbapi.cursor()
    try:
        text = _executable(conn.info, cursor, statement, parameters)
        return cast(bytes, cursor.mogrify(text, parameters)).decode(extensions.encodings[dbapi.encoding])
    finally:
        cursor.close()
