"""A campus console session ends with the provider's evidence of its role, against a real Keycloak
and a real `viplanes serve` (issue 41). Operator olaf signs in twice (Keycloak's own login form,
driven with requests as a browser would); an admin removes him from netops and disables him. The
session that keeps sending `vl_rt` ends at its next refresh; the one that stopped sending it used to
keep the operator role for the whole `VIPLANES_UI_SESSION_S` (8 h) and could create an operator
principal. Now it ends within the ID token's lifetime + the grace, as does a session at a provider
that issues no refresh token. Unit version: tests/unit/api/ui/test_campus_session_bound.py."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.keycloak import Keycloak, realm
from tests.support.keycloak_device import _form, _go
from tests.support.procs import wait_for
from tests.support.serve import bootstrap, memory_serve
from viplanes.lab.servechild import ServeChild

pytestmark = pytest.mark.integration
TOKEN_S, GRACE_S = 10, 5  # the realm's token lifetime, the membership grace
SLACK_S = 10  # a loaded 2-core machine


@pytest.fixture(scope="module")
def keycloak(keycloak_server: Keycloak) -> Iterator[Keycloak]:
    with realm(keycloak_server, "sessionbound", access_token_s=TOKEN_S) as kc:
        yield kc


@pytest.fixture(scope="module")
def serve(keycloak: Keycloak, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeChild]:
    work = tmp_path_factory.mktemp("serve")
    secret = work / "console-secret"
    secret.write_text("console-test-secret\n")
    secret.chmod(0o600)
    db = f"sqlite:///{work / 'bound.db'}"
    bootstrap(db)
    env = dict(
        os.environ,
        VIPLANES_OIDC_ISSUER=keycloak.issuer,
        VIPLANES_OIDC_AUDIENCE="viplanes-api",
        VIPLANES_OIDC_GROUP_ROLES="hpc-users=researcher,netops=operator",
        VIPLANES_OIDC_CLIENT_ID="viplanes-console",
        VIPLANES_OIDC_CLIENT_SECRET_FILE=str(secret),
        VIPLANES_UI_SECRET="session-bound-test",
        VIPLANES_OIDC_MEMBERSHIP_GRACE_S=str(GRACE_S),
    )
    s = memory_serve(db, Path(work), env=env).start()
    yield s
    s.stop()


def sign_in(s: ServeChild, user: str, password: str) -> requests.Session:
    """Start at the console, type the password on Keycloak's form, land back signed in."""
    browser = requests.Session()
    r = _go(browser, "GET", f"{s.url}/ui/login/campus?next=/ui/principals")
    action, fields = _form(r)
    r = _go(browser, "POST", action, {**fields, "username": user, "password": password})
    assert r.status_code == 200 and "/ui/login/callback" in r.url, (r.status_code, r.url, r.text[:300])
    assert browser.cookies.get("vl_session"), "no console session after the callback"
    return browser


def drop(browser: requests.Session, name: str) -> None:
    for c in list(browser.cookies):
        if c.name == name:
            browser.cookies.clear(c.domain, c.path, c.name)


def page(browser: requests.Session, s: ServeChild, path: str) -> requests.Response:
    return browser.get(f"{s.url}{path}", allow_redirects=False, timeout=30)


def ended(r: requests.Response) -> bool:
    return (
        r.status_code == 302 and "/ui/login" in r.headers.get("Location", "") and "expired=1" in r.headers["Location"]
    )


def user(kc: Keycloak, name: str, **change: object) -> None:
    uid = kc.user_id(name)
    kc.admin("PUT", f"/{kc.realm}/users/{uid}", {**kc.admin("GET", f"/{kc.realm}/users/{uid}").json(), **change})


def membership(kc: Keycloak, name: str, group: str, member: bool) -> None:
    gid = next(g["id"] for g in kc.admin("GET", f"/{kc.realm}/groups?search={group}").json() if g["name"] == group)
    kc.admin("PUT" if member else "DELETE", f"/{kc.realm}/users/{kc.user_id(name)}/groups/{gid}")


def test_a_session_without_its_refresh_cookie_ends_with_the_evidence(keycloak: Keycloak, serve: ServeChild) -> None:
    keeps = sign_in(serve, "olaf", "olaf-test-pass")
    drops = sign_in(serve, "olaf", "olaf-test-pass")
    assert keeps.cookies.get("vl_rt") and drops.cookies.get("vl_rt")
    drop(drops, "vl_rt")  # the browser (or whoever stole vl_session) stops sending it
    assert page(drops, serve, "/ui/principals").status_code == 200
    membership(keycloak, "olaf", "netops", member=False)
    user(keycloak, "olaf", enabled=False)
    t0 = time.monotonic()
    try:
        bound = TOKEN_S + GRACE_S
        gone = wait_for(lambda: ended(page(drops, serve, "/ui/principals")), bound + SLACK_S, 0.5)
        took = time.monotonic() - t0
        assert gone, f"olaf's session without vl_rt still answers 200 {took:.0f} s after he was disabled"
        assert ended(page(keeps, serve, "/ui/principals"))  # the refresh with vl_rt is refused
        form = page(drops, serve, "/ui/principals")
        assert form.status_code == 302  # nothing left to create an operator principal with
        print(f"the session without vl_rt ended {took:.1f} s after olaf was disabled (bound {bound} s)")
    finally:
        user(keycloak, "olaf", enabled=True)
        membership(keycloak, "olaf", "netops", member=True)


def test_a_provider_without_refresh_tokens_ends_the_session_with_the_evidence(
    keycloak: Keycloak, serve: ServeChild
) -> None:
    console = next(c for c in keycloak.admin("GET", f"/{keycloak.realm}/clients?clientId=viplanes-console").json())
    attrs = dict(console.get("attributes") or {}, **{"use.refresh.tokens": "false"})
    keycloak.admin("PUT", f"/{keycloak.realm}/clients/{console['id']}", {**console, "attributes": attrs})
    browser = sign_in(serve, "rita", "rita-test-pass")
    assert not browser.cookies.get("vl_rt"), "Keycloak still issued a refresh token"
    assert page(browser, serve, "/ui/mine").status_code == 200
    user(keycloak, "rita", enabled=False)
    t0 = time.monotonic()
    try:
        gone = wait_for(lambda: ended(page(browser, serve, "/ui/mine")), TOKEN_S + GRACE_S + SLACK_S, 0.5)
        took = time.monotonic() - t0
        assert gone, f"rita's session (no refresh token) still answers 200 {took:.0f} s after she was disabled"
        assert page(browser, serve, "/ui/mine").status_code == 302
        print(f"rita's session (no refresh token) ended {took:.1f} s after she was disabled")
    finally:
        user(keycloak, "rita", enabled=True)
