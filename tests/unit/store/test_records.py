"""The store's records on a real database (SQLite here, PostgreSQL under -m postgres): schema and
migrations, principals and tokens, grants."""

from __future__ import annotations

import pytest

from tests.support.clock import T0
from tests.support.store import principals
from tests.support.world import GRANT
from viplanes.errors import Conflict, Invalid, NotFound
from viplanes.store import records as store
from viplanes.store.backup import max_revision
from viplanes.store.db import Database
from viplanes.store.migrations import current, upgrade


def test_schema_is_migrated(db):
    assert current(db.engine) == max_revision()
    db.create_all()  # idempotent
    assert current(db.engine) == max_revision()


def test_principals_and_tokens(db):
    with db.write() as s:
        p, token = store.create_principal(s, "alice", "researcher", T0)
        with pytest.raises(Conflict):
            store.create_principal(s, "alice", "operator", T0)
    with db.read() as s:
        assert store.caller_for_token(s, token).name == "alice"
        assert store.caller_for_token(s, token + "x") is None
    with db.write() as s:
        new = store.rotate_token(s, "alice", T0)
    with db.write() as s:
        assert store.caller_for_token(s, token) is None and store.caller_for_token(s, new).role == "researcher"
        store.set_disabled(s, "alice")
    with db.read() as s:
        assert store.caller_for_token(s, new) is None
        with pytest.raises(NotFound):
            store.get_principal(s, "nobody")


def test_grant_validation_and_listing(db):
    principals(db, ("alice", "researcher"))
    with db.write() as s, pytest.raises(Invalid):
        store.create_grant(
            s, store.GrantInput(principal="alice", **{**GRANT, "src_prefixes": ["10.1.0.1/24"]}), "root", T0
        )
    with db.write() as s, pytest.raises(Invalid):
        store.create_grant(s, store.GrantInput(principal="alice", **GRANT, valid_from=T0, valid_until=T0), "root", T0)
    with db.read() as s:
        (g,) = store.list_grants(s)
        assert g.ports == ["443", "9000-9100"] and store.grant_state(g, T0) == "active"


def test_models_and_migrations_agree(db_url):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from viplanes.store.models import Base

    db = Database(db_url)  # migrated by Alembic here, not copied from the unit suite's template
    try:
        upgrade(db.engine)
        with db.engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
    finally:
        db.dispose()
