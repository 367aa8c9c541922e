"""A PostgreSQL role that can log in and holds no privilege on any table: the insider of issue 28.

PostgreSQL checks no privilege for ``NOTIFY``/``pg_notify``, so such a role can wake (or, on
older code, command) every listener of the deployment's database.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import psycopg2
import pytest

_roles = itertools.count(1)


def unprivileged(pg_cluster: Any, db_url: str) -> Any:
    """A connection as a fresh role: LOGIN, no grant of any kind (what PUBLIC gets by default)."""
    role = f"mallory_{os.getpid()}_{next(_roles)}"
    admin = psycopg2.connect(pg_cluster.url())
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"CREATE ROLE {role} LOGIN")
    admin.close()
    conn = psycopg2.connect(db_url.replace("postgresql://postgres@", f"postgresql://{role}@", 1))
    conn.autocommit = True
    with conn.cursor() as cur, pytest.raises(psycopg2.errors.InsufficientPrivilege):
        cur.execute("SELECT state FROM lanes")  # it cannot read a lane, let alone change one
    return conn


def forge(conn: Any, channel: str, payload: str) -> None:
    with conn.cursor() as cur:
        cur.execute("SELECT pg_notify(%s, %s)", (channel, payload))
