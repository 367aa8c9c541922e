"""libpq gets the URL as given, with our bounds added where the URL sets none (pgconnect)."""

from __future__ import annotations

from viplanes.store.pgconnect import PgSettings, connect_kwargs, libpq_url, redact

MULTI = "postgresql+psycopg2://u:p%25w@h1:5432,h2:5433/db?target_session_attrs=read-write"


def test_the_driver_suffix_goes_and_the_rest_stays_as_given() -> None:
    assert libpq_url(MULTI) == MULTI.replace("+psycopg2", "")


def test_our_bounds_are_added_and_the_urls_own_win() -> None:
    kw = connect_kwargs(MULTI, PgSettings())
    assert kw["keepalives"] == "1" and kw["tcp_user_timeout"] == "10000" and kw["connect_timeout"] == "5"
    assert "-c statement_timeout=30000" in kw["options"] and "-c lock_timeout=10000" in kw["options"]
    own = connect_kwargs(
        "postgresql://u@/db?host=a,b&port=1,2&keepalives_idle=9&options=-c%20lock_timeout%3D1", PgSettings()
    )
    assert "keepalives_idle" not in own  # the URL's own 9 s stays
    assert own["options"].endswith("-c lock_timeout=1")  # after ours: PostgreSQL keeps the last


def test_passwords_never_reach_a_log_line() -> None:
    assert redact(MULTI) == "postgresql+psycopg2://u:***@h1:5432,h2:5433/db?target_session_attrs=read-write"
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"
