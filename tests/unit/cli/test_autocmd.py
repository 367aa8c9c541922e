"""`viplanes grant create/update --auto...` and `viplanes auto on|off|status` against a real server."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from viplanes.cli import exitcodes
from viplanes.cli.main import main


@pytest.fixture
def run(live, world, tmp_path):
    def invoke(who, *args):
        env = {
            "VIPLANES_API_URL": live.url,
            "VIPLANES_TOKEN": world.tokens[who],
            "VIPLANES_CONFIG": str(tmp_path / "none.toml"),
        }
        return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)

    return invoke


def test_grant_update_changes_only_the_options_given(run, world):
    gid = str(world.grants["alice"])
    r = run("root", "grant", "update", gid, "--auto", "--auto-fireflies", "--auto-idle", "20", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) | {"ended_lanes": []} == {
        "grant_id": int(gid),
        "enabled": True,
        "fireflies": True,
        "idle_s": 20,
        "min_rate_mbps": None,
        "window_s": 2.0,
        "min_bytes": None,
        "max_auto_lanes": 1,
        "max_duration_s": 3600,
        "ended_lanes": [],
    }
    r = run("root", "grant", "update", gid, "--auto-max", "3", "--json")
    assert json.loads(r.output)["idle_s"] == 20 and json.loads(r.output)["max_auto_lanes"] == 3
    assert run("root", "grant", "update", gid).exit_code == 2  # nothing to change: usage
    refused = run("alice", "grant", "update", gid, "--no-auto")  # researchers may not
    assert refused.exit_code == exitcodes.REFUSED and "operator" in refused.output
    bad = run("root", "grant", "update", gid, "--auto", "--no-auto-fireflies")  # no threshold at all
    assert bad.exit_code == exitcodes.REFUSED and "threshold" in bad.output and "Traceback" not in bad.output


def test_grant_create_with_auto(run):
    r = run(
        "root",
        "grant",
        "create",
        "--principal",
        "bob",
        "--src",
        "10.1.0.20/32",
        "--dst",
        "203.0.113.0/24",
        "--ports",
        "9000",
        "--max-duration",
        "600",
        "--auto",
        "--auto-rate",
        "100",
        "--json",
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["auto"]["enabled"] is True and out["auto"]["min_rate_mbps"] == 100


def test_auto_off_on_status(run):
    assert run("root", "auto", "status").output.strip() == "automatic lanes on; live: 0"
    assert run("root", "auto", "off").output.strip() == "automatic lanes off; live: 0; ended lanes: none"
    assert run("alice", "auto", "status").output.startswith("automatic lanes off")
    assert run("alice", "auto", "on").exit_code == exitcodes.REFUSED
    assert run("root", "auto", "on").output.startswith("automatic lanes on")
