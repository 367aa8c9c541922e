"""The lane hot path's statements on SQLite's own cursor, compiled once by SQLAlchemy.

Why (issue 13): a prebuilt Core statement still costs ~40 us of SQLAlchemy per execution on top
of ~5 us in sqlite3 (the cache key walk, the execution context, bind and result set-up: measured
45 vs 4.5 us for the grants query). A lane request + release runs 11 of them plus BEGIN and
COMMIT, so about a fifth of its CPU was that bookkeeping. Here each statement is compiled once
by SQLAlchemy for the dialect (the SQL text, the order of its parameters, the literal values it
carries, the types' own bind and result processors) and then run straight on the DB-API
connection of the transaction's ``Connection``; errors are wrapped into SQLAlchemy's exception
classes exactly as Core wraps them (``IntegrityError``, ``OperationalError``), so callers and
the API's error handlers see no difference.

The plain Core path is kept, and taken, whenever the raw one could differ:
- not SQLite (PostgreSQL keeps Core: ``viplanes/store/lanesql/prepared.py`` prepares its statements through
  SQLAlchemy's cursor events);
- anyone listens to ``before_cursor_execute`` on the engine (tests that count statements,
  ``bench.probes.profile_request --sql``): they see every statement as before;
- a statement that needs SQLAlchemy at execution time: expanding ``IN`` lists, Python-side
  column defaults, RETURNING.
``tests/unit/store/test_rawsql.py`` runs every hot statement both ways and compares rows and results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, cast

from sqlalchemy import Connection, exc
from sqlalchemy.orm import Session
from sqlalchemy.sql import Executable

Executor = Connection | Session  # a Session (an ORM caller's transaction) always takes Core

_REQUIRED = object()


class Compiled(NamedTuple):
    sql: str
    names: tuple[str, ...]  # the positional parameters, in order (a name may repeat)
    lookups: tuple[str, ...]  # per parameter: the key it is taken from in ``params``
    static: tuple[Any, ...]  # per parameter: the value written in the statement, or _REQUIRED
    binds: tuple[Callable[[Any], Any] | None, ...]  # per parameter: the type's bind processor
    keys: tuple[str, ...]  # result columns (selects)
    results: tuple[Callable[[Any], Any] | None, ...]  # per result column: its result processor


_compiled: dict[tuple[int, int, tuple[str, ...] | None], tuple[Executable, Compiled | None]] = {}
_COMPILED_MAX = 256  # a server uses ~15; each LanePool (one per LaneManager) adds its lookup
stats = {"raw": 0, "core": 0}  # executions per path, for tests and benchmarks


def _compile(stmt: Executable, conn: Connection, column_keys: tuple[str, ...] | None) -> Compiled | None:
    dialect = conn.dialect
    comp: Any = cast(Any, stmt).compile(dialect=dialect, column_keys=list(column_keys) if column_keys else None)
    if (
        comp.positiontup is None
        or comp.post_compile_params
        or comp.literal_execute_params
        or getattr(comp, "insert_prefetch", None)
        or getattr(comp, "update_prefetch", None)
        or getattr(comp, "effective_returning", None)
    ):
        return None  # needs SQLAlchemy at execution time: Core
    names = tuple(comp.positiontup)
    lookups, static, binds = [], [], []
    for name in names:
        bind = comp.binds[name]
        if bind.callable is not None:
            return None
        # as Core's construct_params: the caller's value by the parameter's key (then its
        # compiled name), else the value written in the statement
        lookups.append(bind.key)
        static.append(_REQUIRED if bind.required else bind.value)
        binds.append(bind.type.dialect_impl(dialect).bind_processor(dialect))
    keys: tuple[str, ...] = ()
    results: list[Callable[[Any], Any] | None] = []
    columns = getattr(stmt, "selected_columns", None)
    if columns is not None:
        keys = tuple(columns.keys())
        results = [col.type.dialect_impl(dialect).result_processor(dialect, None) for col in columns]
    return Compiled(str(comp), names, tuple(lookups), tuple(static), tuple(binds), keys, tuple(results))


def compiled_for(conn: Executor, stmt: Executable, params: dict[str, Any]) -> Compiled | None:
    """The raw form of ``stmt`` for this connection and these parameter names, or None (Core)."""
    if not isinstance(conn, Connection) or conn.dialect.name != "sqlite" or conn.dispatch.before_cursor_execute:
        return None
    column_keys = tuple(sorted(params)) if getattr(stmt, "is_dml", False) else None
    key = (id(stmt), id(conn.dialect), column_keys)
    hit = _compiled.get(key)
    if hit is None or hit[0] is not stmt:  # the statement object is kept: its id stays its own
        hit = (stmt, _compile(stmt, conn, column_keys))
        if len(_compiled) >= _COMPILED_MAX:  # statements are module constants; a bound anyway
            _compiled.clear()
        _compiled[key] = hit
    return hit[1]


def _run(executor: Executor, c: Compiled, params: dict[str, Any]) -> Any:
    conn = cast(Connection, executor)  # ``compiled_for`` gives a raw form only for a Connection
    values = []
    for name, lookup, static, bind in zip(c.names, c.lookups, c.static, c.binds, strict=True):
        if lookup in params:
            value = params[lookup]
        elif name in params or static is _REQUIRED:
            value = params[name]  # KeyError for a missing required one, as Core
        else:
            value = static
        values.append(bind(value) if bind is not None else value)
    raw: Any = conn.connection.dbapi_connection
    dbapi = conn.dialect.loaded_dbapi
    try:
        return raw.execute(c.sql, values)
    except dbapi.Error as err:  # the exception Core would raise (IntegrityError, OperationalError)
        raise exc.DBAPIError.instance(c.sql, values, err, dbapi.Error, dialect=conn.dialect) from err


def _processed(c: Compiled, row: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(p(v) if p is not None else v for p, v in zip(c.results, row, strict=True))


def rows(conn: Executor, stmt: Executable, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Every row of a SELECT, as tuples."""
    c = compiled_for(conn, stmt, params)
    if c is None:
        stats["core"] += 1
        return [tuple(r) for r in conn.execute(stmt, params)]
    stats["raw"] += 1
    return [_processed(c, r) for r in _run(conn, c, params).fetchall()]


def first_mapping(conn: Executor, stmt: Executable, params: dict[str, Any]) -> dict[str, Any] | None:
    """The first row of a SELECT as a dict of its columns, or None."""
    c = compiled_for(conn, stmt, params)
    if c is None:
        stats["core"] += 1
        row = conn.execute(stmt, params).mappings().first()
        return None if row is None else dict(row)
    stats["raw"] += 1
    found = _run(conn, c, params).fetchone()
    return None if found is None else dict(zip(c.keys, _processed(c, found), strict=True))


def scalar(conn: Executor, stmt: Executable, params: dict[str, Any]) -> Any:
    """The first column of the first row, or None."""
    c = compiled_for(conn, stmt, params)
    if c is None:
        stats["core"] += 1
        return conn.scalar(stmt, params)
    stats["raw"] += 1
    found = _run(conn, c, params).fetchone()
    return None if found is None else _processed(c, found)[0]


def write(conn: Executor, stmt: Executable, params: dict[str, Any]) -> tuple[int, int | None]:
    """An INSERT/UPDATE/DELETE: (rows matched, the new row's id for an INSERT)."""
    c = compiled_for(conn, stmt, params)
    if c is None:
        stats["core"] += 1
        result: Any = conn.execute(stmt, params)
        new_id = result.inserted_primary_key[0] if getattr(result, "is_insert", False) else None
        return result.rowcount, new_id
    stats["raw"] += 1
    cursor = _run(conn, c, params)
    return cursor.rowcount, cursor.lastrowid


def execute_text(conn: Connection, sql: str) -> None:
    """A fixed statement without parameters (``BEGIN IMMEDIATE``): raw unless someone listens."""
    if conn.dialect.name != "sqlite" or conn.dispatch.before_cursor_execute:
        stats["core"] += 1
        conn.exec_driver_sql(sql)
        return
    stats["raw"] += 1
    dbapi = conn.dialect.loaded_dbapi
    try:
        conn.connection.dbapi_connection.execute(sql)  # type: ignore[union-attr]
    except dbapi.Error as err:
        raise exc.DBAPIError.instance(sql, (), err, dbapi.Error, dialect=conn.dialect) from err
