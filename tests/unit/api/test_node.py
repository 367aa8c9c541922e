"""The API worker process's app: built once, then out of the cyclic collector's way."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from viplanes.cli.api import worker_app


@pytest.fixture
def thawed() -> Iterator[None]:
    """Give the frozen objects back to the collector so later tests see a normal heap."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def tracked_ids() -> set[int]:
    return {id(o) for o in gc.get_objects()}  # the three generations; frozen objects are not in them


def test_the_worker_app_and_what_it_holds_are_frozen(sqlite_url: str, thawed: None) -> None:
    app: Any = worker_app(sqlite_url, None)
    try:
        ids = tracked_ids()
        assert gc.get_freeze_count() > 10_000  # the app and the modules it imported
        assert id(app) not in ids
        assert id(app.url_map) not in ids
        assert id(app.view_functions) not in ids
        r = app.test_client().get("/healthz")
        assert r.status_code == 200  # a frozen app still serves
    finally:
        app.extensions["viplanes"].db.dispose()


def test_a_full_collection_after_the_freeze_walks_only_what_came_later(sqlite_url: str, thawed: None) -> None:
    app: Any = worker_app(sqlite_url, None)
    try:
        assert len(gc.get_objects()) < gc.get_freeze_count() // 10
    finally:
        app.extensions["viplanes"].db.dispose()
