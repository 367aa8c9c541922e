"""The console's client settings: the secret comes from a file only the service can read."""

from __future__ import annotations

from pathlib import Path

import pytest

from viplanes.authz.oidcconsole import ConsoleOidcSettings
from viplanes.settings import Settings

BASE = {"VIPLANES_OIDC_ISSUER": "https://sso.campus.test/realms/v", "VIPLANES_OIDC_CLIENT_ID": "viplanes-console"}


def secret_file(tmp_path: Path, mode: int, text: str = "s3cret\n") -> Path:
    f = tmp_path / "client-secret"
    f.write_text(text)
    f.chmod(mode)
    return f


def test_off_without_a_client_id() -> None:
    assert ConsoleOidcSettings.from_settings(Settings.from_env({})) is None


def test_secret_from_a_0600_file(tmp_path: Path) -> None:
    env = BASE | {"VIPLANES_OIDC_CLIENT_SECRET_FILE": str(secret_file(tmp_path, 0o600))}
    got = ConsoleOidcSettings.from_settings(Settings.from_env(env))
    assert got is not None and got.client_secret == "s3cret" and got.display_name == "campus sign-in"
    assert "s3cret" not in repr(got)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_secret_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    """The attack: any local user reads the console's secret and redeems codes as the console."""
    env = BASE | {"VIPLANES_OIDC_CLIENT_SECRET_FILE": str(secret_file(tmp_path, mode))}
    with pytest.raises(ValueError, match="others can read it; chmod 600"):
        ConsoleOidcSettings.from_settings(Settings.from_env(env))


@pytest.mark.parametrize(
    "over,message",
    [
        ({"VIPLANES_OIDC_ISSUER": ""}, "VIPLANES_OIDC_ISSUER is not"),
        ({}, "client secret"),
        ({"VIPLANES_OIDC_CLIENT_SECRET": "a", "VIPLANES_OIDC_CLIENT_SECRET_FILE": "/x"}, "not both"),
        ({"VIPLANES_OIDC_CLIENT_SECRET_FILE": "/nonexistent/secret"}, "No such file"),
        ({"VIPLANES_OIDC_CLIENT_SECRET": "a", "VIPLANES_OIDC_REDIRECT_URI": "https://evil.test/"}, "callback"),
    ],
)
def test_bad_settings_are_one_readable_error(over: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ConsoleOidcSettings.from_settings(Settings.from_env(BASE | over))


def test_empty_secret_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="empty"):
        ConsoleOidcSettings.from_settings(
            Settings.from_env(BASE | {"VIPLANES_OIDC_CLIENT_SECRET_FILE": str(secret_file(tmp_path, 0o600, " "))})
        )


def test_scope_must_ask_for_an_id_token() -> None:
    env = BASE | {"VIPLANES_OIDC_CLIENT_SECRET": "a", "VIPLANES_OIDC_SCOPE": "openid  email org.cilogon.userinfo"}
    got = ConsoleOidcSettings.from_settings(Settings.from_env(env))
    assert got is not None and got.scope == "openid email org.cilogon.userinfo"
    with pytest.raises(ValueError, match="openid"):
        ConsoleOidcSettings.from_settings(Settings.from_env(env | {"VIPLANES_OIDC_SCOPE": "email profile"}))
