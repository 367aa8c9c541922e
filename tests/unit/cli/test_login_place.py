"""`login.json` is trusted only in a place that is the user's own (issue 41): in a directory
others may write to, anyone can swap in a login of their own (the victim's lanes then run under
the attacker's name) or take the next one; a file owned by another user is someone else's."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.oidc_tokens import ISSUER
from viplanes.cli import exitcodes
from viplanes.cli.main import main
from viplanes.client.login import LoginError, StoredLogin

NOBODY = 65534


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("VIPLANES_TOKEN", raising=False)
    monkeypatch.setenv("VIPLANES_CONFIG", str(tmp_path / "none.toml"))
    yield tmp_path / "viplanes" / "login.json"


def stored() -> StoredLogin:
    return StoredLogin(ISSUER, "viplanes-cli", "r1", "a1", 2e9)


def test_a_login_in_a_world_writable_directory_is_refused(home: Path) -> None:
    stored().save(home)
    home.parent.chmod(0o777)
    with pytest.raises(LoginError, match="writable by others"):
        StoredLogin.load(home)
    r = CliRunner().invoke(main, ["lane", "list"])
    assert r.exit_code == exitcodes.LOGIN and len(r.output.strip().splitlines()) == 1, r.output
    assert "writable by others" in r.output
    with pytest.raises(LoginError, match="writable by others"):
        stored().save(home)  # nor is a new one written there


def test_a_sticky_shared_directory_is_fine_for_ones_own_file(home: Path) -> None:
    stored().save(home)
    home.parent.chmod(0o1777)
    assert StoredLogin.load(home) == stored()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a file owned by another user")
def test_a_login_file_owned_by_another_user_is_refused(home: Path) -> None:
    stored().save(home)
    os.chown(home, NOBODY, NOBODY)
    with pytest.raises(LoginError, match="belongs to another user"):
        StoredLogin.load(home)
