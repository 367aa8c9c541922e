"""The migrations form one line: tests that need "the newest schema" ask for it instead of pinning a
number, so a branch adding a migration does not have to edit them."""

from __future__ import annotations

from alembic.script import ScriptDirectory

from viplanes.store.backup import max_revision
from viplanes.store.migrations import HERE, alembic_config


def test_one_head_and_it_is_the_newest_file():
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    files = sorted(p.name.split("_", 1)[0] for p in (HERE / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))
    assert heads == [max_revision()] == [files[-1]]
