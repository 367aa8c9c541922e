"""The console's "Sign in with <campus>" (code flow + PKCE) against a stand-in provider: the happy
path, sign-out at the provider, and each attack refused with a readable 4xx page."""

from __future__ import annotations

import html
import re
import time
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support.fake_campus import CLIENT_ID, CONSOLE, FakeCampus
from tests.support.oidc_tokens import ISSUER
from tests.support.ui import post, sign_in
from tests.support.world import World
from viplanes.api.ui.campusclient import CampusClient
from viplanes.authz.oidc import OidcSettings

SETTINGS = OidcSettings(
    issuer=ISSUER, audience="viplanes-api", group_roles={"hpc-users": "researcher", "netops": "operator"}
)


@pytest.fixture
def idp(world: World) -> FakeCampus:
    world.clock.now = time.time()  # the ID tokens' exp is real time; the session's evidence is judged on this clock
    fake = FakeCampus()
    world.app.extensions["viplanes_ui"].campus = CampusClient(SETTINGS, CONSOLE, fake.fetch_json, fake.exchange)
    return fake


def start(world: World, nxt: str = "/ui/mine") -> str:
    r = world.client.get("/ui/login/campus", query_string={"next": nxt})
    assert r.status_code == 302, r.text
    return str(r.headers["Location"])


def callback(world: World, back: dict[str, str]) -> Any:
    return world.client.get("/ui/login/callback", query_string=back)


def signed_in_as(world: World) -> str | None:
    r = world.client.get("/ui/mine")
    if r.status_code != 200:
        return None
    return r.text.split('class="who">', 1)[1].split("<", 1)[0]


def test_login_page_offers_the_campus_and_keeps_tokens(world: World, idp: FakeCampus) -> None:
    page = world.client.get("/ui/login").text
    assert "Sign in with Campus U" in page and 'id="token"' in page
    sign_in(world.client, world.tokens["root"])  # break-glass token sign-in still works
    assert signed_in_as(world) == "root (operator)"


def test_rita_signs_in_and_lands_on_her_lanes(world: World, idp: FakeCampus) -> None:
    url = start(world)
    q = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    assert url.startswith(ISSUER + "/protocol/openid-connect/auth?")
    assert q["code_challenge_method"] == "S256" and len(q["code_challenge"]) == 43
    assert q["state"] and q["nonce"] and q["redirect_uri"] == "http://localhost/ui/login/callback"
    r = callback(world, idp.authorize(url))
    assert r.status_code == 200, r.text
    assert 'http-equiv="refresh" content="0;url=/ui/mine"' in r.text
    assert signed_in_as(world) == "rita (researcher)"
    listed = world.client.get("/api/v1/principals", headers=world.h("root")).json
    items = listed["items"] if isinstance(listed, dict) else listed
    assert [p["role"] for p in items if p["name"] == "rita"] == ["researcher"]


def test_groups_decide_the_console_role(world: World, idp: FakeCampus) -> None:
    assert callback(world, idp.authorize(start(world), groups=["netops"])).status_code == 200
    assert signed_in_as(world) == "rita (operator)"
    assert world.client.get("/ui/audit").status_code == 200


def test_state_mismatch_is_refused(world: World, idp: FakeCampus) -> None:
    """Login CSRF: the attacker's callback (their code, another state) in the victim's browser."""
    back = idp.authorize(start(world)) | {"state": "attackers-state"}
    r = callback(world, back)
    assert r.status_code == 400 and "state_mismatch" in r.text
    assert signed_in_as(world) is None


def test_a_callback_without_a_sign_in_of_this_browser_is_refused(world: World, idp: FakeCampus) -> None:
    back = idp.authorize(start(world))
    world.client.delete_cookie("vl_oidc", path="/ui")
    r = callback(world, back)
    assert r.status_code == 400 and "no_sign_in_in_progress" in r.text


def test_nonce_mismatch_is_refused(world: World, idp: FakeCampus) -> None:
    """An ID token minted for another sign-in (another nonce) replayed into this one."""
    r = callback(world, idp.authorize(start(world), nonce="nonce-of-another-sign-in"))
    assert r.status_code == 400 and "nonce_mismatch" in r.text
    assert signed_in_as(world) is None


def test_access_denied_at_the_provider(world: World, idp: FakeCampus) -> None:
    back = idp.authorize(start(world))
    r = callback(world, {"error": "access_denied", "error_description": "user cancelled", "state": back["state"]})
    assert r.status_code == 403 and "access_denied" in r.text and "user cancelled" in r.text


def test_a_person_without_a_mapped_group_gets_no_session(world: World, idp: FakeCampus) -> None:
    r = callback(world, idp.authorize(start(world), groups=["library"]))
    assert r.status_code == 403 and "no_role" in r.text
    assert signed_in_as(world) is None


def test_a_replayed_code_is_refused_even_by_a_lax_provider(world: World, idp: FakeCampus) -> None:
    """The attacker captured the callback URL and the transaction cookie and replays both."""
    idp.reject_reused = False
    back = idp.authorize(start(world))
    tx_cookie = world.client.get_cookie("vl_oidc", path="/ui").value
    assert callback(world, back).status_code == 200
    world.client.delete_cookie("vl_session", path="/ui")
    world.client.set_cookie("vl_oidc", tx_cookie, path="/ui")
    r = callback(world, back)
    assert r.status_code == 400 and "transaction_replayed" in r.text
    assert signed_in_as(world) is None


def test_a_code_replayed_in_a_new_transaction_is_refused(world: World, idp: FakeCampus) -> None:
    """The attacker captured only the callback URL and finishes it in a sign-in of their own."""
    idp.reject_reused = False
    back = idp.authorize(start(world))
    assert callback(world, back).status_code == 200
    world.client.delete_cookie("vl_session", path="/ui")
    state = parse_qs(urlsplit(start(world)).query)["state"][0]
    r = callback(world, back | {"state": state})
    assert r.status_code == 400 and "code_replayed" in r.text
    assert signed_in_as(world) is None


def test_a_code_the_provider_refuses(world: World, idp: FakeCampus) -> None:
    back = idp.authorize(start(world))
    idp.codes.clear()  # expired at the provider
    r = callback(world, back)
    assert r.status_code == 400 and "code_rejected" in r.text


def test_an_id_token_for_another_client_is_refused(world: World, idp: FakeCampus) -> None:
    r = callback(world, idp.authorize(start(world), aud="other-app", azp="other-app"))
    assert r.status_code == 400 and "wrong_audience" in r.text


def test_keys_rotated_at_the_provider_need_no_restart(world: World, idp: FakeCampus) -> None:
    """The provider replaces its signing key: the next ID token names a new kid, the JWKS is
    fetched again (no restart), and sign-in goes on."""
    no_gap = replace(SETTINGS, jwks_refetch_s=0)  # the refetch gap is tested in test_oidc.py
    world.app.extensions["viplanes_ui"].campus = CampusClient(no_gap, CONSOLE, idp.fetch_json, idp.exchange)
    assert callback(world, idp.authorize(start(world))).status_code == 200
    idp.rotate("k2")
    del idp.keys["k1"]
    idp.kid = "k2"
    world.client.delete_cookie("vl_session", path="/ui")
    r = callback(world, idp.authorize(start(world)))
    assert r.status_code == 200, r.text
    assert signed_in_as(world) == "rita (researcher)"
    assert sum(u.endswith("/certs") for u in idp.fetched) == 2


def test_disabling_the_principal_ends_the_campus_session(world: World, idp: FakeCampus) -> None:
    assert callback(world, idp.authorize(start(world))).status_code == 200
    assert world.client.post("/api/v1/principals/rita/disable", headers=world.h("root")).status_code == 200
    assert signed_in_as(world) is None
    r = callback(world, idp.authorize(start(world)))
    assert r.status_code == 403 and "principal_disabled" in r.text


def test_a_session_cookie_moved_to_another_principal_is_no_session(world: World, idp: FakeCampus) -> None:
    """The attack: keep the signed part, change the principal id in front of it (to root's)."""
    assert callback(world, idp.authorize(start(world))).status_code == 200
    value = world.client.get_cookie("vl_session", path="/ui").value
    assert value.startswith("p")
    _, _, signed = value.partition(".")
    world.client.set_cookie("vl_session", "p1." + signed, path="/ui")
    assert signed_in_as(world) is None


def test_sign_out_ends_both_sessions(world: World, idp: FakeCampus) -> None:
    assert callback(world, idp.authorize(start(world))).status_code == 200
    r = post(world.client, "/ui/logout")
    assert r.status_code == 200  # a page moving on by itself: CSP form-action stops a cross-origin redirect
    refresh = re.search(r'http-equiv="refresh" content="0;url=([^"]+)"', r.text)
    assert refresh and "rita" not in r.text  # rendered signed out
    to = urlsplit(html.unescape(refresh.group(1)))
    q = {k: v[0] for k, v in parse_qs(to.query).items()}
    assert f"{to.scheme}://{to.netloc}{to.path}" == ISSUER + "/protocol/openid-connect/logout"
    assert q["post_logout_redirect_uri"] == "http://localhost/ui/login" and q["client_id"] == CLIENT_ID
    assert q["id_token_hint"].count(".") == 2
    assert signed_in_as(world) is None


def test_token_sign_out_stays_local(world: World, idp: FakeCampus) -> None:
    sign_in(world.client, world.tokens["alice"])
    r = post(world.client, "/ui/logout")
    assert r.headers["Location"].endswith("/ui/login")


def test_campus_sign_in_off_is_a_404_page(world: World) -> None:
    r = world.client.get("/ui/login/campus")
    assert r.status_code == 404 and "campus_sign_in_off" in r.text
    assert "Sign in with" not in world.client.get("/ui/login").text


@pytest.mark.parametrize("nxt", ["https://evil.test/ui/mine", "//evil.test/ui/", "/api/v1/principals"])
def test_sign_in_never_lands_outside_the_console(world: World, idp: FakeCampus, nxt: str) -> None:
    """The attack: a sign-in link whose `next` sends the freshly signed-in person to a look-alike."""
    r = callback(world, idp.authorize(start(world, nxt)))
    assert r.status_code == 200
    assert 'content="0;url=/ui/"' in r.text
