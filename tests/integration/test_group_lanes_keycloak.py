"""Issue 30 end to end against a real Keycloak: rita signs in from the CLI with the device grant
(a second client approves the code at Keycloak's own pages), asks for a lane under the
hpc-users group grant, keeps one past the bound while `viplanes transfer` runs, and loses it when an admin removes her from the group (at once when her
next token shows it, else within the stated bound) or disables her account.

The realm's access tokens live ACCESS_S here (300 s in the fixture), the membership grace is
GRACE_S and the sweep runs every SWEEP_S, so the bound is ACCESS_S + GRACE_S + SWEEP_S.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.keycloak import Keycloak, realm
from tests.support.keycloak_device import approve
from tests.support.serve import VIPLANES, bootstrap, memory_serve

pytestmark = pytest.mark.integration

# 10 s tokens: each renewal (the CLI refreshes whenever < 60 s is left, the console at half the
# token's life) still comes well inside exp + grace, and each bound waited out is 17 s, not 37 s
ACCESS_S, GRACE_S, SWEEP_S = 10, 5, 2
BOUND_S = ACCESS_S + GRACE_S + SWEEP_S
SLACK_S = 8  # a loaded 2-core machine: the sweep's own read, the poll below


@pytest.fixture(scope="module")
def keycloak(keycloak_server: Keycloak) -> Iterator[Keycloak]:
    with realm(keycloak_server, "grouplanes", access_token_s=ACCESS_S) as kc:
        yield kc


@pytest.fixture(scope="module")
def world(keycloak: Keycloak, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("serve")
    db = f"sqlite:///{work / 'groups.db'}"
    op = bootstrap(db)
    env = dict(
        os.environ,
        VIPLANES_OIDC_ISSUER=keycloak.issuer,
        VIPLANES_OIDC_AUDIENCE="viplanes-api",
        VIPLANES_OIDC_GROUP_ROLES="hpc-users=researcher,netops=operator",
        VIPLANES_OIDC_MEMBERSHIP_GRACE_S=str(GRACE_S),
        VIPLANES_OIDC_MEMBERSHIP_SWEEP_S=str(SWEEP_S),
    )
    s = memory_serve(db, Path(work), env=env).start()
    home = work / "home"  # rita's $XDG_CONFIG_HOME
    cli_env = {k: v for k, v in os.environ.items() if not k.startswith("VIPLANES_")}
    cli_env.update(
        XDG_CONFIG_HOME=str(home),
        VIPLANES_CONFIG=str(work / "no-config.toml"),
        VIPLANES_API_URL=s.url,
        VIPLANES_OIDC_ISSUER=keycloak.issuer,
    )
    yield {"serve": s, "op": op, "env": cli_env, "home": home, "kc": keycloak}
    s.stop()


def cli(
    w: dict[str, Any], *args: str, token: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = dict(w["env"], **({"VIPLANES_TOKEN": token} if token else {}))
    return subprocess.run([*VIPLANES, *args], env=env, capture_output=True, text=True, timeout=timeout)


def lane_state(w: dict[str, Any], lane_id: int) -> dict[str, Any]:
    r = requests.get(
        f"{w['serve'].url}/api/v1/lanes/{lane_id}", headers={"Authorization": f"Bearer {w['op']}"}, timeout=30
    )
    return dict(r.json())


def revoke_reason(w: dict[str, Any], lane_id: int) -> str:
    r = requests.get(
        f"{w['serve'].url}/api/v1/audit",
        params={"target": f"lane:{lane_id}", "action": "lane.revoke"},
        headers={"Authorization": f"Bearer {w['op']}"},
        timeout=30,
    ).json()
    items = r["items"] if isinstance(r, dict) else r
    return " | ".join(f"{e['actor']}: {e['reason']}" for e in items)


def membership(kc: Keycloak, user: str, group: str, member: bool) -> None:
    gid = next(g["id"] for g in kc.admin("GET", f"/{kc.realm}/groups?search={group}").json() if g["name"] == group)
    kc.admin("PUT" if member else "DELETE", f"/{kc.realm}/users/{kc.user_id(user)}/groups/{gid}")


def request_lane(w: dict[str, Any], port: int) -> int:
    """rita's lane through the CLI and her stored login (no API token given)."""
    r = cli(w, "lane", "request", "--src", "10.1.0.10", "--dst", "203.0.113.10", "--dst-port", str(port),
            "--duration", "600", "--purpose", "cryo-EM upload", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    lane = json.loads(r.stdout)
    assert lane["state"] == "active", lane
    return int(lane["id"])


def wait_ended(w: dict[str, Any], lane_id: int, since: float, limit_s: float) -> float:
    while time.monotonic() - since < limit_s:
        if lane_state(w, lane_id)["state"] != "active":
            return time.monotonic() - since
        time.sleep(0.5)
    raise AssertionError(f"lane {lane_id} still {lane_state(w, lane_id)['state']} after {limit_s:.0f} s")


def test_1_device_login_then_a_lane_under_the_group_grant(world: dict[str, Any]) -> None:
    w = world
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [*VIPLANES, "login"], env=w["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    shown = ""
    while (m := re.search(r"enter the code (\S+)\n\(or open (\S+)\)", shown)) is None:
        line = proc.stderr.readline()
        assert line, f"login printed no code: {shown}"
        shown += line
    page = approve(m.group(2), m.group(1), "rita", "rita-test-pass")  # the second client: a person's browser
    out, err = proc.communicate(timeout=60)
    print(f"device login approved and stored in {time.monotonic() - t0:.1f} s")
    assert proc.returncode == 0, err
    assert "successful" in page.lower() and "signed in as rita" in out
    login = w["home"] / "viplanes" / "login.json"
    assert stat.S_IMODE(login.stat().st_mode) == 0o600
    grant = cli(w, "grant", "create", "--group", "hpc-users", "--src", "10.1.0.0/24", "--dst", "203.0.113.0/24",
                "--ports", "9000-9300", "--max-duration", "3600", "--max-lanes", "5", token=w["op"])  # fmt: skip
    assert grant.returncode == 0, grant.stderr
    who = cli(w, "principal", "whoami")
    assert who.returncode == 0 and "rita (researcher)" in who.stdout, who.stderr
    request_lane(w, 9001)


def test_2_transfer_keeps_the_membership_renewed_while_it_runs(world: dict[str, Any]) -> None:
    """Past the bound with no command of hers but `viplanes transfer`: its lease extensions
    refresh the login, each fresh token renews the membership, the lane stays."""
    w = world
    run_s = BOUND_S + SLACK_S + 5
    proc = subprocess.Popen(
        [*VIPLANES, "transfer", "--src", "10.1.0.10", "--dst", "203.0.113.10", "--dst-ports", "9010",
         "--protocol", "tcp", "--lease", "15", "--require-lane", "--purpose", "sync", "--", "sleep", str(run_s)],
        env=w["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    shown = ""
    while (m := re.search(r"lane (\d+) active", shown)) is None:
        line = proc.stderr.readline()
        assert line, f"transfer got no lane: {shown}"
        shown += line
    lane_id = int(m.group(1))
    time.sleep(BOUND_S + SLACK_S)
    assert lane_state(w, lane_id)["state"] == "active", revoke_reason(w, lane_id)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    print(f"lane {lane_id} stayed active {BOUND_S + SLACK_S} s (> bound {BOUND_S} s) under viplanes transfer")


def test_3_a_token_showing_the_group_gone_ends_the_lane_at_once(world: dict[str, Any]) -> None:
    w = world
    lane_id = request_lane(w, 9002)
    membership(w["kc"], "rita", "hpc-users", member=False)
    t0 = time.monotonic()
    r = cli(w, "lane", "show", str(lane_id))  # the CLI refreshes: the new token lacks hpc-users
    assert r.returncode == 1 and "no_role" in r.stderr, r.stderr
    took = wait_ended(w, lane_id, t0, 5)
    print(f"lane {lane_id} revoked {took:.1f} s after the removal (next token)")
    assert lane_state(w, lane_id)["state"] == "revoked"
    assert "oidc: rita is no longer in group hpc-users" in revoke_reason(w, lane_id)


def test_4_removed_and_silent_the_lane_ends_within_the_bound(world: dict[str, Any]) -> None:
    w = world
    membership(w["kc"], "rita", "hpc-users", member=True)
    lane_id = request_lane(w, 9003)
    membership(w["kc"], "rita", "hpc-users", member=False)
    t0 = time.monotonic()
    took = wait_ended(w, lane_id, t0, BOUND_S + SLACK_S)
    print(f"lane {lane_id} revoked {took:.1f} s after the removal (bound {BOUND_S} s)")
    assert took > GRACE_S  # ended by the evidence running out, not by a request
    assert "not renewed" in revoke_reason(w, lane_id)


def test_5_a_disabled_account_loses_its_lane_within_the_bound(world: dict[str, Any]) -> None:
    w = world
    kc = w["kc"]
    membership(kc, "rita", "hpc-users", member=True)
    lane_id = request_lane(w, 9004)
    kc.admin("PUT", f"/{kc.realm}/users/{kc.user_id('rita')}", {"enabled": False})
    t0 = time.monotonic()
    r = cli(w, "lane", "list")  # the refresh is refused: one line, exit code 6
    assert r.returncode == 6 and "login" in r.stderr, (r.returncode, r.stderr)
    took = wait_ended(w, lane_id, t0, BOUND_S + SLACK_S)
    print(f"lane {lane_id} revoked {took:.1f} s after the account was disabled (bound {BOUND_S} s)")
    assert "not renewed" in revoke_reason(w, lane_id)
    kc.admin("PUT", f"/{kc.realm}/users/{kc.user_id('rita')}", {"enabled": True})
