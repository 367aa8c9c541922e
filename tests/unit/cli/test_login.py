"""`viplanes login` without a provider: the device grant's polling rules, the stored login's file
rules, silent refresh, and which token a command uses. The real Keycloak run is
tests/integration/test_group_lanes_keycloak.py."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from viplanes.cli import exitcodes
from viplanes.cli.main import main
from viplanes.client.http import ApiError
from viplanes.client.login import (
    DeviceCode,
    Endpoints,
    LoginBearer,
    LoginError,
    StoredLogin,
    bearer_for,
    discover,
    poll_token,
)

ISSUER = "https://idp.campus.test/realms/viplanes"
EP = Endpoints(device=ISSUER + "/device", token=ISSUER + "/token", revocation=None)


def answer(status: int, body: dict[str, Any]) -> requests.Response:
    r = requests.Response()
    r.status_code = status
    r._content = json.dumps(body).encode()
    return r


class FakeSession(requests.Session):
    """Answers POSTs from a script, GETs with a discovery document; records what was sent."""

    def __init__(self, posts: list[requests.Response], doc: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.posts, self.doc, self.sent = posts, doc, []  # type: ignore[var-annotated]

    def post(self, url: Any, data: Any = None, **_kw: Any) -> requests.Response:  # type: ignore[override]
        self.sent.append(data)
        return self.posts.pop(0)

    def get(self, url: Any, **_kw: Any) -> requests.Response:  # type: ignore[override]
        doc = self.doc or {"issuer": ISSUER, "device_authorization_endpoint": EP.device, "token_endpoint": EP.token}
        return answer(200, doc)


def code(interval: int = 5, expires_in: int = 600) -> DeviceCode:
    return DeviceCode("dev-1", "ABCD-EFGH", ISSUER + "/device", None, interval, expires_in)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += s


def test_polling_waits_the_interval_and_slows_down_when_told() -> None:
    session = FakeSession(
        [
            answer(400, {"error": "authorization_pending"}),
            answer(400, {"error": "slow_down"}),
            answer(400, {"error": "authorization_pending"}),
            answer(200, {"access_token": "a.b.c", "refresh_token": "r1", "expires_in": 300}),
        ]
    )
    clock = Clock()
    got = poll_token(session, EP, "viplanes-cli", code(), sleep=clock.sleep, clock=lambda: clock.t)
    assert got["refresh_token"] == "r1"
    assert clock.sleeps == [5, 5, 10, 10]  # RFC 8628 3.5: slow_down adds 5 s for good


def test_a_refused_sign_in_and_an_expired_code_stop_the_polling() -> None:
    clock = Clock()
    with pytest.raises(LoginError) as denied:
        poll_token(
            FakeSession([answer(400, {"error": "access_denied"})]), EP, "c", code(), clock.sleep, lambda: clock.t
        )
    assert denied.value.code == "denied"
    pending = [answer(400, {"error": "authorization_pending"}) for _ in range(10)]
    with pytest.raises(LoginError) as expired:
        poll_token(FakeSession(pending), EP, "c", code(expires_in=20), clock.sleep, lambda: clock.t)
    assert expired.value.code == "expired"


def test_a_plain_http_issuer_is_refused() -> None:
    """The attack: a config pointing at http:// lets anyone on the path read the tokens."""
    with pytest.raises(LoginError) as exc:
        discover(FakeSession([]), "http://idp.campus.test/realms/viplanes")
    assert exc.value.code == "insecure_issuer"


def test_a_discovery_document_naming_another_issuer_is_refused() -> None:
    doc = {"issuer": "https://evil.test", "device_authorization_endpoint": EP.device, "token_endpoint": EP.token}
    with pytest.raises(LoginError) as exc:
        discover(FakeSession([], doc), ISSUER)
    assert exc.value.code == "wrong_issuer"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("VIPLANES_TOKEN", raising=False)
    monkeypatch.setenv("VIPLANES_CONFIG", str(tmp_path / "none.toml"))
    yield tmp_path / "viplanes" / "login.json"


def stored(expires_at: float = 2e9) -> StoredLogin:
    return StoredLogin(ISSUER, "viplanes-cli", "r1", "a1", expires_at)


def test_the_login_is_written_0600_whatever_the_umask(home: Path) -> None:
    old = os.umask(0)
    try:
        stored().save(home)
    finally:
        os.umask(old)
    assert stat.S_IMODE(home.stat().st_mode) == 0o600
    assert stat.S_IMODE(home.parent.stat().st_mode) == 0o700
    assert StoredLogin.load(home) == stored()


def test_a_login_file_others_can_read_is_refused(home: Path) -> None:
    """The attack it stops: a refresh token left readable (a copied home, a lax umask) is
    someone else's login; refused, not used."""
    stored().save(home)
    home.chmod(0o644)
    with pytest.raises(LoginError, match="readable by others"):
        StoredLogin.load(home)
    r = CliRunner().invoke(main, ["lane", "list"])
    assert r.exit_code == exitcodes.LOGIN, r.output


def test_a_symlink_planted_at_the_login_path_is_not_followed(home: Path, tmp_path: Path) -> None:
    """The attack: plant a link to a login of one's own (the victim's lanes then run under the
    attacker's name) or to a file the victim's save would overwrite."""
    planted = tmp_path / "attackers-login.json"
    StoredLogin(ISSUER, "viplanes-cli", "r-attacker", "a-attacker", 2e9).save(planted)
    home.parent.mkdir(parents=True)
    home.symlink_to(planted)
    with pytest.raises(LoginError):
        StoredLogin.load(home)
    stored().save(home)  # replaces the link, never writes through it
    assert StoredLogin.load(planted).refresh_token == "r-attacker" and not home.is_symlink()  # type: ignore[union-attr]


def test_an_access_token_near_expiry_is_refreshed_and_the_new_refresh_token_kept(home: Path) -> None:
    session = FakeSession([answer(200, {"access_token": "a2", "refresh_token": "r2", "expires_in": 300})])
    bearer = LoginBearer(stored(expires_at=1000.0 + 30), home, session, now=lambda: 1000.0)
    assert bearer() == "a2" and bearer.refreshes == 1
    assert session.sent[0]["grant_type"] == "refresh_token" and session.sent[0]["refresh_token"] == "r1"
    assert StoredLogin.load(home).refresh_token == "r2"  # type: ignore[union-attr]
    assert bearer() == "a2" and bearer.refreshes == 1  # fresh now: no second refresh


def test_a_refused_refresh_is_login_expired(home: Path) -> None:
    """Removed, disabled or signed out at the provider: the refresh fails; the CLI says so."""
    session = FakeSession([answer(400, {"error": "invalid_grant", "error_description": "Session not active"})])
    bearer = LoginBearer(stored(expires_at=0), home, session, now=lambda: 1000.0)
    with pytest.raises(ApiError) as exc:
        bearer()
    assert (exc.value.status, exc.value.error) == (401, "login_expired")


def test_an_explicit_api_token_wins_over_the_stored_login(home: Path) -> None:
    stored().save(home)
    assert bearer_for("vl_robot") is None
    assert isinstance(bearer_for(None), LoginBearer)


def test_without_token_or_login_the_exit_code_says_so(home: Path) -> None:
    r = CliRunner().invoke(main, ["lane", "list"])
    assert r.exit_code == exitcodes.NO_TOKEN and "viplanes login" in r.output


def test_login_without_an_issuer_is_a_usage_error(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VIPLANES_OIDC_ISSUER", raising=False)
    r = CliRunner().invoke(main, ["login"])
    assert r.exit_code == exitcodes.USAGE and "issuer" in r.output
