"""Console sign-in at a real Keycloak, in Debian's headless Chromium: rita (a researcher by her
group) clicks "Sign in with <campus>", types her password on Keycloak's own login page, lands on
her lanes page, requests a lane within a grant, signs out, and Keycloak's session is gone too.
Then she requests a lane under the grant to her group hpc-users: it stays while her console is
open (the console refreshes her ID token, renewing the membership), and ends within the bound
once an admin removes her from the group and the console is closed.

The realm's tokens live ACCESS_S here (300 s in the fixture), the membership grace is GRACE_S and
the sweep runs every SWEEP_S: the bound is ACCESS_S + GRACE_S + SWEEP_S."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.keycloak import Keycloak, realm
from tests.support.procs import wait_for
from tests.support.serve import bootstrap, memory_serve
from viplanes.lab.servechild import ServeChild

pytestmark = pytest.mark.integration
DISPLAY = "Campus SSO"
# 10 s tokens: each renewal (the CLI refreshes whenever < 60 s is left, the console at half the
# token's life) still comes well inside exp + grace, and each bound waited out is 17 s, not 37 s
ACCESS_S, GRACE_S, SWEEP_S = 10, 5, 2
BOUND_S = ACCESS_S + GRACE_S + SWEEP_S
SLACK_S = 8  # a loaded 2-core machine: the sweep's own read, the poll below


@pytest.fixture(scope="module")
def keycloak(keycloak_server: Keycloak) -> Iterator[Keycloak]:
    with realm(keycloak_server, "console", access_token_s=ACCESS_S) as kc:
        yield kc


@pytest.fixture(scope="module")
def serve(keycloak: Keycloak, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeChild, str]]:
    work = tmp_path_factory.mktemp("serve")
    secret = work / "console-secret"
    secret.write_text("console-test-secret\n")
    secret.chmod(0o600)
    db = f"sqlite:///{work / 'console.db'}"
    op = bootstrap(db)
    env = dict(
        os.environ,
        VIPLANES_OIDC_ISSUER=keycloak.issuer,
        VIPLANES_OIDC_AUDIENCE="viplanes-api",
        VIPLANES_OIDC_GROUP_ROLES="hpc-users=researcher,netops=operator",
        VIPLANES_OIDC_CLIENT_ID="viplanes-console",
        VIPLANES_OIDC_CLIENT_SECRET_FILE=str(secret),
        VIPLANES_OIDC_DISPLAY_NAME=DISPLAY,
        VIPLANES_UI_SECRET="console-browser-test",
        VIPLANES_OIDC_MEMBERSHIP_GRACE_S=str(GRACE_S),
        VIPLANES_OIDC_MEMBERSHIP_SWEEP_S=str(SWEEP_S),
    )
    s = memory_serve(db, Path(work), env=env).start()
    yield s, op
    s.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=opts)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def until(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    return wait_for(check, timeout, 0.2, what=what, ignore=(Exception,))


def keycloak_sign_in(driver: Any, user: str, password: str) -> None:
    from selenium.webdriver.common.by import By

    until(lambda: driver.find_element(By.ID, "username"), "Keycloak's login page")
    driver.find_element(By.ID, "username").send_keys(user)
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.ID, "kc-login").click()


def sessions_at_keycloak(kc: Keycloak, user: str) -> list[Any]:
    return list(kc.admin("GET", f"/{kc.realm}/users/{kc.user_id(user)}/sessions").json())


def test_rita_signs_in_at_keycloak_requests_a_lane_and_signs_out(
    keycloak: Keycloak, serve: tuple[ServeChild, str], browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    s, op = serve
    t0 = time.monotonic()
    browser.get(f"{s.url}/ui/login")
    button = browser.find_element(By.ID, "campus-sign-in")
    assert button.text == f"Sign in with {DISPLAY}"
    button.click()
    assert browser.current_url.startswith(keycloak.issuer + "/protocol/openid-connect/auth?")
    keycloak_sign_in(browser, "rita", "rita-test-pass")
    until(lambda: browser.current_url == f"{s.url}/ui/mine", "rita's lanes page")
    assert browser.find_element(By.CSS_SELECTOR, ".who").text == "rita (researcher)"
    signed_in_s = time.monotonic() - t0
    assert len(sessions_at_keycloak(keycloak, "rita")) == 1

    # her principal exists since the sign-in: an operator grants her a range of ports
    h = {"Authorization": f"Bearer {op}"}
    grant = {
        "principal": "rita",
        "src_prefixes": ["10.1.0.0/24"],
        "dst_prefixes": ["203.0.113.10/32"],
        "protocols": ["tcp"],
        "ports": ["9000-9300"],
        "max_duration_s": 3600,
    }
    r = requests.post(f"{s.url}/api/v1/grants", json=grant, headers=h, timeout=30)
    assert r.status_code == 201, r.text
    gid = r.json()["id"]
    browser.get(f"{s.url}/ui/mine")
    browser.find_element(By.ID, f"purpose-{gid}").send_keys("campus sign-in test")
    browser.find_element(By.CSS_SELECTOR, f"form[aria-labelledby=req-{gid}] button[type=submit]").click()

    def rita_lane() -> Any:
        lanes = requests.get(f"{s.url}/api/v1/lanes", headers=h, timeout=30).json()
        items = lanes["items"] if isinstance(lanes, dict) else lanes
        return next(x for x in items if x["principal"] == "rita" and x["state"] == "active")

    lane = until(rita_lane, "rita's lane active", 30)
    assert lane["dst_port"] == 9000
    until(  # the request lands on the lane's page; sign out from there once it has loaded
        lambda: (
            browser.current_url == f"{s.url}/ui/lanes/{lane['id']}"
            and browser.execute_script("return document.readyState") == "complete"
        ),
        "rita's lane page",
    )

    # sign out: the console's session and Keycloak's
    browser.find_element(By.CSS_SELECTOR, "form.signout button").click()
    landed = wait_for(lambda: browser.current_url.startswith(f"{s.url}/ui/login"), 60, 0.2, ignore=(Exception,))
    assert landed, f"not back on the console's sign-in page: at {browser.current_url}: {browser.page_source[:1500]}"
    assert sessions_at_keycloak(keycloak, "rita") == []
    browser.get(f"{s.url}/ui/mine")
    assert browser.current_url.startswith(f"{s.url}/ui/login")
    browser.find_element(By.ID, "campus-sign-in").click()  # Keycloak asks for the password again
    until(lambda: browser.find_element(By.ID, "username"), "Keycloak's login page again")
    print(f"signed in through Keycloak in {signed_in_s:.1f} s; whole flow {time.monotonic() - t0:.1f} s")


def test_a_person_in_no_mapped_group_signs_out_and_in_as_another(
    keycloak: Keycloak, serve: tuple[ServeChild, str], browser: Any
) -> None:
    """lena (group library, no role here) is refused; the refusal page signs her out here and at
    Keycloak, and "Sign in with <campus>" then shows Keycloak's login page, where rita signs in."""
    from selenium.webdriver.common.by import By

    s, _ = serve
    browser.get(f"{s.url}/ui/login")
    browser.find_element(By.ID, "campus-sign-in").click()
    keycloak_sign_in(browser, "lena", "lena-test-pass")
    until(lambda: "no_role" in browser.page_source, "the refusal page")
    assert browser.current_url.startswith(f"{s.url}/ui/login/callback")
    assert "403" in browser.find_element(By.TAG_NAME, "h1").text
    assert len(sessions_at_keycloak(keycloak, "lena")) == 1
    browser.get(f"{s.url}/ui/mine")
    assert browser.current_url.startswith(f"{s.url}/ui/login")  # no console session
    # Keycloak's session persists: signing in again lands on the refusal without a login page
    browser.find_element(By.ID, "campus-sign-in").click()
    until(lambda: browser.current_url.startswith(f"{s.url}/ui/login/callback"), "the refusal page again")
    until(lambda: browser.find_element(By.ID, "campus-sign-out"), "its sign-out button")

    browser.find_element(By.ID, "campus-sign-out").click()
    landed = wait_for(lambda: browser.current_url.startswith(f"{s.url}/ui/login"), 60, 0.2, ignore=(Exception,))
    assert landed, f"not back on the sign-in page: at {browser.current_url}: {browser.page_source[:1500]}"
    assert sessions_at_keycloak(keycloak, "lena") == []  # ended at Keycloak too
    browser.find_element(By.ID, "campus-sign-in").click()
    until(lambda: browser.find_element(By.ID, "username"), "Keycloak's login page, not lena again")
    assert "prompt=login" in browser.current_url
    keycloak_sign_in(browser, "rita", "rita-test-pass")
    until(lambda: browser.current_url == f"{s.url}/ui/mine", "rita's lanes page")
    assert browser.find_element(By.CSS_SELECTOR, ".who").text == "rita (researcher)"


def membership(kc: Keycloak, user: str, group: str, member: bool) -> None:
    gid = next(g["id"] for g in kc.admin("GET", f"/{kc.realm}/groups?search={group}").json() if g["name"] == group)
    kc.admin("PUT" if member else "DELETE", f"/{kc.realm}/users/{kc.user_id(user)}/groups/{gid}")


def test_rita_requests_a_lane_under_her_groups_grant_and_loses_it_when_removed(
    keycloak: Keycloak, serve: tuple[ServeChild, str], browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    s, op = serve
    h = {"Authorization": f"Bearer {op}"}
    grant = {
        "group": "hpc-users",  # not her principal: every member of the group
        "src_prefixes": ["10.1.0.0/24"],
        "dst_prefixes": ["203.0.113.10/32"],
        "protocols": ["tcp"],
        "ports": ["9400-9500"],
        "max_duration_s": 3600,
    }
    r = requests.post(f"{s.url}/api/v1/grants", json=grant, headers=h, timeout=30)
    assert r.status_code == 201, r.text
    gid = r.json()["id"]

    browser.get(f"{s.url}/ui/login")
    browser.find_element(By.ID, "campus-sign-in").click()
    keycloak_sign_in(browser, "rita", "rita-test-pass")
    until(lambda: browser.current_url == f"{s.url}/ui/mine", "rita's lanes page")
    assert "(group hpc-users)" in browser.find_element(By.ID, f"req-{gid}").text
    browser.find_element(By.ID, f"purpose-{gid}").send_keys("group grant from the console")
    browser.find_element(By.CSS_SELECTOR, f"form[aria-labelledby=req-{gid}] button[type=submit]").click()

    def group_lane() -> Any:
        lanes = requests.get(f"{s.url}/api/v1/lanes", headers=h, timeout=30).json()
        items = lanes["items"] if isinstance(lanes, dict) else lanes
        return next(x for x in items if x["grant_id"] == gid and x["state"] == "active")

    lane = until(group_lane, "rita's lane under the hpc-users grant", 30)

    # her console stays open (its lanes table polls every 3 s): the server refreshes her ID token
    # with Keycloak's refresh token, so the lane outlives the first token's exp + grace + sweep
    browser.get(f"{s.url}/ui/mine")
    time.sleep(BOUND_S + SLACK_S)
    assert lane_of(s, h, lane["id"])["state"] == "active"
    print(f"lane {lane['id']} stayed active {BOUND_S + SLACK_S} s (> bound {BOUND_S} s) with the console open")

    browser.get("about:blank")  # the console is closed: nothing renews her membership any more
    membership(keycloak, "rita", "hpc-users", member=False)
    t0 = time.monotonic()
    try:
        ended = wait_for(
            lambda: lane_of(s, h, lane["id"])["state"] != "active", BOUND_S + SLACK_S, 0.5, ignore=(Exception,)
        )
        took = time.monotonic() - t0
        assert ended, f"lane {lane['id']} still active {took:.0f} s after rita left hpc-users (bound {BOUND_S} s)"
        assert lane_of(s, h, lane["id"])["state"] == "revoked"
        audit = requests.get(
            f"{s.url}/api/v1/audit",
            params={"target": f"lane:{lane['id']}", "action": "lane.revoke"},
            headers=h,
            timeout=30,
        ).json()
        items = audit["items"] if isinstance(audit, dict) else audit
        assert [e["actor"] for e in items] == ["oidc"] and "hpc-users" in items[0]["reason"], items
        print(f"lane {lane['id']} revoked {took:.1f} s after rita left hpc-users (bound {BOUND_S} s)")
    finally:
        membership(keycloak, "rita", "hpc-users", member=True)


def lane_of(s: ServeChild, h: dict[str, str], lane_id: int) -> dict[str, Any]:
    return dict(requests.get(f"{s.url}/api/v1/lanes/{lane_id}", headers=h, timeout=30).json())
