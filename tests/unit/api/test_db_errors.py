"""A database error reaches the client as JSON, never a traceback: a dropped (invalidated)
connection, such as the one ``pg_prepare`` drops on a stale prepared plan, is a 503 "try again";
any other driver error stays a logged 500."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError

from tests.support.apps import make_app


class _DriverError(Exception):
    pass


def _app(tmp_path, invalidated: bool):  # type: ignore[no-untyped-def]
    app = make_app({"db_url": f"sqlite:///{tmp_path / 'e.db'}"})

    def boom():  # type: ignore[no-untyped-def]
        raise DBAPIError(
            "INSERT ...",
            {},
            _DriverError("cached plan must not change result type"),
            connection_invalidated=invalidated,
        )

    app.add_url_rule("/boom", "boom", boom)
    return app


def test_a_dropped_connection_is_a_503_with_retry_after(tmp_path):
    r = _app(tmp_path, invalidated=True).test_client().get("/boom")
    assert r.status_code == 503 and r.headers["Retry-After"] == "1"
    assert r.get_json()["error"] == "database_unavailable"


def test_any_other_driver_error_is_a_plain_500(tmp_path):
    r = _app(tmp_path, invalidated=False).test_client().get("/boom")
    assert r.status_code == 500 and r.get_json()["error"] == "internal"
    assert "cached plan" not in r.get_data(as_text=True)
