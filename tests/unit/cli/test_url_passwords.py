"""A PostgreSQL password given in the URL's query (``?password=``, which libpq honours like the
userinfo one) is a secret like any other (issue 41): `config show` and `doctor` print it masked,
and a file every user can read holding it is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from viplanes.cli.main import main
from viplanes.store.pgconnect import redact

CLEAN = {"VIPLANES_DB_URL": "", "VIPLANES_TOKEN": "", "VIPLANES_CONFIG": "", "VIPLANES_LANE_RETENTION_DAYS": ""}
URLS = [
    "postgresql://vl@db.example/viplanes?password=hunter2",
    "postgresql://vl@db.example/viplanes?sslmode=require&password=hunter2",
    "postgresql://vl:hunter2@db.example/viplanes?sslpassword=hunter2",
    "postgresql+psycopg2://vl@h1:5432,h2:5433/viplanes?target_session_attrs=read-write&PASSWORD=hunter2",
]


def _file(tmp_path: Path, url: str, mode: int) -> Path:
    path = tmp_path / "viplanes.toml"
    path.write_text(f'[db]\nurl = "{url}"\n')
    path.chmod(mode)
    return path


@pytest.mark.parametrize("url", URLS)
def test_config_show_masks_a_query_password(tmp_path: Path, url: str) -> None:
    r = CliRunner().invoke(main, ["--config", str(_file(tmp_path, url, 0o600)), "config", "show"], env=CLEAN)
    assert r.exit_code == 0, r.output
    assert "hunter2" not in r.output, r.output
    assert "***" in r.output


@pytest.mark.parametrize("url", URLS)
def test_a_query_password_in_a_world_readable_file_is_refused(tmp_path: Path, url: str) -> None:
    r = CliRunner().invoke(main, ["--config", str(_file(tmp_path, url, 0o644)), "config", "check"], env=CLEAN)
    assert r.exit_code == 78 and "every user can read" in r.output, r.output


@pytest.mark.parametrize("url", URLS)
def test_the_logged_url_hides_a_query_password(url: str) -> None:
    """What `doctor` and the logs print (``Database.display_url``)."""
    shown = redact(url)
    assert "hunter2" not in shown and "db.example" in shown or "h1:5432" in shown


def test_doctor_does_not_print_a_query_password() -> None:
    url = "postgresql://vl@127.0.0.1:1/viplanes?password=hunter2&connect_timeout=1"
    r = CliRunner().invoke(main, ["doctor", "--db", url], env=CLEAN)
    assert "hunter2" not in r.output, r.output
