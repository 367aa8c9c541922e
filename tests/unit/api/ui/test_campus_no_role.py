"""A person the provider signs in but whose groups map to no role: the refusal page offers
sign-out here and at the provider, and the next sign-in asks the provider for a fresh login
(``prompt=login``) so another account can be chosen. Keycloak itself: test_oidc_console_browser.py."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support.fake_campus import CLIENT_ID, CONSOLE, FakeCampus
from tests.support.oidc_tokens import ISSUER
from tests.support.ui import csrf_of
from tests.support.world import World
from viplanes.api.ui.campusclient import CampusClient
from viplanes.authz.oidc import OidcSettings

SETTINGS = OidcSettings(issuer=ISSUER, audience="viplanes-api", group_roles={"hpc-users": "researcher"})


@pytest.fixture
def idp(world: World) -> FakeCampus:
    fake = FakeCampus()
    world.app.extensions["viplanes_ui"].campus = CampusClient(SETTINGS, CONSOLE, fake.fetch_json, fake.exchange)
    return fake


def start(world: World, **args: str) -> str:
    r = world.client.get("/ui/login/campus", query_string=args)
    assert r.status_code == 302, r.text
    return str(r.headers["Location"])


def query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def refused(world: World, idp: FakeCampus) -> Any:
    r = world.client.get("/ui/login/callback", query_string=idp.authorize(start(world), groups=["library"]))
    assert r.status_code == 403 and "no_role" in r.text, r.text
    return r


def test_the_refusal_page_offers_sign_out_here_and_at_the_provider(world: World, idp: FakeCampus) -> None:
    page = refused(world, idp).text
    assert 'id="campus-sign-out"' in page and 'action="/ui/logout/campus"' in page
    assert 'id="campus-other-account"' in page and "prompt=login" in page
    r = world.client.post("/ui/logout/campus", data={"csrf": csrf_of(page)})
    assert r.status_code == 200, r.text  # a page moving on by itself (CSP form-action 'self')
    refresh = re.search(r'http-equiv="refresh" content="0;url=([^"]+)"', r.text)
    assert refresh, r.text
    to = html.unescape(refresh.group(1))
    q = query(to)
    assert to.startswith(ISSUER + "/protocol/openid-connect/logout?")
    assert q["post_logout_redirect_uri"] == "http://localhost/ui/login" and q["client_id"] == CLIENT_ID
    assert q["id_token_hint"].count(".") == 2  # the refused person's ID token: the provider ends that session
    # back on the sign-in page, "Sign in with <campus>" asks for a fresh login, once
    assert query(start(world)).get("prompt") == "login"
    assert "prompt" not in query(start(world))


def test_sign_in_with_another_account_asks_for_a_fresh_login(world: World, idp: FakeCampus) -> None:
    assert query(start(world, prompt="login"))["prompt"] == "login"
    assert "prompt" not in query(start(world, prompt="none"))  # only prompt=login is passed on
    assert "prompt" not in query(start(world))


def test_the_refused_sign_out_needs_the_pages_csrf(world: World, idp: FakeCampus) -> None:
    refused(world, idp)
    r = world.client.post("/ui/logout/campus", data={"csrf": "forged"})
    assert r.status_code == 400 and "csrf_refused" in r.text
    assert "prompt" not in query(start(world))
