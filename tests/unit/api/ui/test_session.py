"""The console's gate: sign-in, sessions (expiry, rotation, disabling, other processes), CSRF,
cookie flags, security headers, and who may open which page."""

from __future__ import annotations

import re

import pytest

from tests.support.ui import csrf_of, post, sign_in
from tests.support.world import World
from viplanes.store import records as store

OPERATOR_PAGES = [
    "/ui/lanes",
    "/ui/lanes/rows",
    "/ui/grants",
    "/ui/grants/1",
    "/ui/principals",
    "/ui/switches",
    "/ui/drift",
    "/ui/audit",
    "/ui/audit.csv",
    "/ui/principals/alice/rotate",
    "/ui/principals/alice/disable",
    "/ui/grants/1/revoke",
]
EVERYONE_PAGES = ["/ui/mine", "/ui/lanes", "/ui/lanes/rows"]


def test_every_page_needs_a_session(world: World):
    for path in OPERATOR_PAGES + EVERYONE_PAGES + ["/ui/", "/ui/lanes/1"]:
        r = world.client.get(path)
        assert r.status_code == 302 and "/ui/login" in r.headers["Location"], path
    r = world.client.post("/ui/grants", data={})
    assert r.status_code == 302 and "/ui/login" in r.headers["Location"]


@pytest.mark.parametrize("path", OPERATOR_PAGES)
@pytest.mark.parametrize("who,allowed", [("root", True), ("alice", False)])
def test_authz_matrix(world: World, path: str, who: str, allowed: bool):
    sign_in(world.client, world.tokens[who])
    r = world.client.get(path)
    if path in EVERYONE_PAGES:
        assert r.status_code == 200
    elif allowed:
        assert r.status_code == 200, r.text
    else:
        assert r.status_code == 403 and "operator" in r.text


def test_home_sends_each_role_to_its_page(world: World):
    sign_in(world.client, world.tokens["root"])
    assert world.client.get("/ui/").headers["Location"].endswith("/ui/lanes")
    other = world.app.test_client()
    sign_in(other, world.tokens["alice"])
    assert other.get("/ui/").headers["Location"].endswith("/ui/mine")


def test_bad_token_is_refused_with_a_message(world: World):
    r = sign_in(world.client, "vl_not-a-token", expect=401)
    assert "unknown, rotated or belongs to a disabled principal" in r.text
    assert "vl_session" not in r.headers.get("Set-Cookie", "")


def test_sign_in_returns_to_the_page_asked_for_but_never_off_site(world: World):
    page = world.client.get("/ui/login?next=/ui/grants")
    r = world.client.post(
        "/ui/login", data={"csrf": csrf_of(page.text), "token": world.tokens["root"], "next": "/ui/grants"}
    )
    assert r.headers["Location"].endswith("/ui/grants")
    for evil in ("//evil.example/ui/", "https://evil.example/ui/", "/api/v1/lanes"):
        page = world.client.get("/ui/login")
        r = world.client.post(
            "/ui/login", data={"csrf": csrf_of(page.text), "token": world.tokens["root"], "next": evil}
        )
        assert r.headers["Location"].endswith("/ui/"), evil


def test_cookie_flags_and_secure_over_tls(world: World):
    cookie = sign_in(world.client, world.tokens["root"]).headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/ui" in cookie
    assert "Secure" not in cookie
    tls = world.app.test_client()
    page = tls.get("/ui/login", base_url="https://localhost")
    r = tls.post(
        "/ui/login", base_url="https://localhost", data={"csrf": csrf_of(page.text), "token": world.tokens["root"]}
    )
    assert "Secure" in r.headers["Set-Cookie"]


def test_security_headers_and_no_inline_script(world: World):
    sign_in(world.client, world.tokens["root"])
    for path in ("/ui/login", "/ui/lanes", "/ui/grants", "/ui/audit", "/ui/mine"):
        r = world.client.get(path)
        csp = r.headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert r.headers["X-Frame-Options"] == "DENY" and r.headers["X-Content-Type-Options"] == "nosniff"
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", r.text), path  # only <script src=...>
        assert " on" + "click=" not in r.text and "javascript:" not in r.text
        assert "http://" not in r.text and "https://" not in r.text  # nothing from a CDN


def test_csrf_refused_on_every_form(world: World):
    sign_in(world.client, world.tokens["root"])
    forms = [
        "/ui/grants",
        "/ui/principals",
        "/ui/logout",
        "/ui/mine/request",
        "/ui/drift",
        f"/ui/grants/{world.grants['alice']}",
        f"/ui/grants/{world.grants['alice']}/revoke",
        "/ui/principals/alice/rotate",
        "/ui/principals/alice/disable",
    ]
    for path in forms:
        for data in ({}, {"csrf": "forged"}):
            r = world.client.post(path, data=data)
            assert r.status_code == 400 and "CSRF" in r.text, path
    with world.app.extensions["viplanes"].db.read() as s:
        assert not store.get_principal(s, "alice").disabled  # nothing happened


def test_sign_in_form_needs_its_csrf_cookie(world: World):
    r = world.client.post("/ui/login", data={"csrf": "x", "token": world.tokens["root"]})
    assert r.status_code == 400 and "CSRF" in r.text


def test_session_expires_on_the_server_clock(world: World):
    sign_in(world.client, world.tokens["root"])
    ttl = world.app.extensions["viplanes_ui"].sessions.ttl_s
    world.clock.advance(ttl - 5)
    assert world.client.get("/ui/lanes").status_code == 200
    world.clock.advance(10)
    r = world.client.get("/ui/lanes")
    assert r.status_code == 302 and "expired=1" in r.headers["Location"]
    assert "Sign in again" in world.client.get(r.headers["Location"]).text


def test_rotated_token_and_disabled_principal_end_sessions(world: World):
    sign_in(world.client, world.tokens["alice"])
    bob = world.app.test_client()
    sign_in(bob, world.tokens["bob"])
    with world.app.extensions["viplanes"].db.write() as s:
        new = store.rotate_token(s, "alice", world.clock())
        store.set_disabled(s, "bob", True)
    assert world.client.get("/ui/mine").status_code == 302
    assert bob.get("/ui/mine").status_code == 302
    sign_in(world.client, new)  # the new token signs in
    assert world.client.get("/ui/mine").status_code == 200


def test_sign_out_ends_the_session(world: World):
    sign_in(world.client, world.tokens["root"])
    r = post(world.client, "/ui/logout")
    assert r.status_code == 302 and r.headers["Location"].endswith("/ui/login")
    assert world.client.get("/ui/lanes").status_code == 302


def test_session_works_in_another_api_process_with_the_same_secret(world: World, monkeypatch):
    """Two API processes on one database and one VIPLANES_UI_SECRET share sessions; another
    secret does not accept them."""
    from tests.support.apps import make_app

    url = str(world.app.extensions["viplanes"].db.url)
    apps = []
    for secret in ("shared-secret", "shared-secret", "another-secret"):
        apps.append(make_app({"db_url": url, "ui_secret": secret}, dataplane=world.dataplane, clock=world.clock))
    try:
        first, second, stranger = (a.test_client() for a in apps)
        cookie = sign_in(first, world.tokens["root"]).headers["Set-Cookie"].split(";")[0]
        name, value = cookie.split("=", 1)
        for client, ok in ((second, True), (stranger, False)):
            client.set_cookie(name, value, path="/ui")
            assert (client.get("/ui/lanes").status_code == 200) is ok
    finally:
        for a in apps:
            a.extensions["viplanes"].db.dispose()


def test_every_form_on_every_page_carries_the_session_csrf_token(world: World):
    """Not only the first form of a page: a macro without the context once rendered empty tokens."""
    from tests.support.ui import CSRF

    for who, pages in (
        (
            "root",
            [
                "/ui/lanes",
                "/ui/grants",
                f"/ui/grants/{world.grants['alice']}",
                "/ui/principals",
                "/ui/principals/alice/rotate",
                "/ui/audit",
            ],
        ),
        ("alice", ["/ui/mine"]),
    ):
        client = world.app.test_client()
        sign_in(client, world.tokens[who])
        for path in pages:
            html = client.get(path).text
            tokens = set(CSRF.findall(html))
            assert len(tokens) == 1 and "" not in tokens, (path, tokens)
            assert html.count("<form") == len(CSRF.findall(html)) or path == "/ui/audit", path


def test_an_expired_poll_brings_the_user_back_to_the_page(world: World):
    r = world.client.get("/ui/lanes/rows?back=mine")
    assert r.status_code == 302 and "next=/ui/mine" in r.headers["Location"]


def test_a_broken_view_answers_an_html_page_not_json(world: World, monkeypatch):
    sign_in(world.client, world.tokens["root"])
    monkeypatch.setattr(
        world.app.extensions["viplanes"].manager, "list", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom"))
    )
    r = world.client.get("/ui/lanes")
    assert r.status_code == 500 and "Internal error" in r.text and r.mimetype == "text/html"


def test_failed_sign_ins_share_the_apis_rate_limit(world: World):
    """Guessing tokens on the sign-in page spends the same budget as guessing them on the API."""
    ctx = world.app.extensions["viplanes"]
    for _ in range(ctx.config.auth_max_failures):
        sign_in(world.client, "vl_guess", expect=401)
    r = sign_in(world.client, "vl_guess", expect=429)
    assert "Too many failed sign-ins" in r.text
    sign_in(world.client, world.tokens["root"])  # like the API, a valid token is always served
    assert world.client.get("/api/v1/whoami", headers={"Authorization": "Bearer vl_guess"}).status_code == 429


def test_a_tampered_or_borrowed_cookie_is_no_session(world: World):
    """The signature covers the payload and is keyed by the token's own hash: changing the
    expiry, or pointing the cookie at another principal's token, fails."""
    root_cookie = sign_in(world.client, world.tokens["root"]).headers["Set-Cookie"].split(";")[0].split("=", 1)[1]
    tid, signed = root_cookie.split(".", 1)
    alice_tid = str(int(tid) + 1)  # alice's token row was made right after root's
    for forged in (f"{alice_tid}.{signed}", f"{tid}.{signed[:-2]}xx", f"{tid}.e30.AAAA", "x.y", ""):
        client = world.app.test_client()
        client.set_cookie("vl_session", forged, path="/ui")
        assert client.get("/ui/mine").status_code == 302, forged
