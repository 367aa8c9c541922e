"""The CLI against a real API server (cheroot, in a thread) (HTTP commands) and a SQLite file (bootstrap, db)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from viplanes.cli.main import main
from viplanes.store.backup import max_revision


@pytest.fixture
def run(live, world, tmp_path):
    runner = CliRunner()
    cfg = tmp_path / "none.toml"  # keep the user's real config out of the tests

    def invoke(who, *args, env=None):
        e = {
            "VIPLANES_API_URL": live.url,
            "VIPLANES_TOKEN": world.tokens.get(who, who or ""),
            "VIPLANES_CONFIG": str(cfg),
            **(env or {}),
        }
        return runner.invoke(main, list(args), env=e, catch_exceptions=False)

    return invoke


def test_principal_add_bootstraps_on_the_database(tmp_path):
    url = f"sqlite:///{tmp_path / 'boot.db'}"
    r = CliRunner().invoke(main, ["principal", "add", "root", "--role", "operator", "--db", url])
    assert r.exit_code == 0
    token = r.stdout.strip().splitlines()[-1]
    assert token.startswith("vl_") and " " not in token
    from viplanes.store.db import Database
    from viplanes.store.records import caller_for_token

    db = Database(url)
    with db.read() as s:
        assert caller_for_token(s, token).role == "operator"
    db.dispose()
    again = CliRunner().invoke(main, ["principal", "add", "root", "--role", "operator", "--db", url])
    assert again.exit_code == 1 and again.stderr.strip() == "error: principal 'root' already exists"
    bad = CliRunner().invoke(main, ["principal", "add", "no spaces", "--role", "operator", "--db", url])
    assert bad.exit_code == 2 and "error:" in bad.stderr


def test_db_upgrade_and_current(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    assert CliRunner().invoke(main, ["db", "current", "--db", url]).stdout.strip() == "none"
    r = CliRunner().invoke(main, ["db", "upgrade", "--db", url])
    assert r.exit_code == 0 and "schema at 0010" in r.stdout
    assert CliRunner().invoke(main, ["db", "current", "--db", url]).stdout.strip() == max_revision()


def test_lane_request_wait_and_exit_codes(run):
    r = run(
        "alice",
        "lane",
        "request",
        "--src",
        "10.1.0.10",
        "--dst",
        "203.0.113.10",
        "--dst-port",
        "9000",
        "--duration",
        "10m",
        "--purpose",
        "sync",
        "--wait",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    lane = json.loads(r.stdout)
    assert lane["state"] == "active" and lane["duration_s"] == 600
    denied = run(
        "alice", "lane", "request", "--src", "10.1.0.10", "--dst", "203.0.113.10", "--dst-port", "22", "--purpose", "x"
    )
    assert denied.exit_code == 1 and denied.stderr.strip() == "error: port 22 is not in grant 1 (port_not_granted)"
    shown = run("alice", "lane", "list")
    assert shown.exit_code == 0 and "203.0.113.10" in shown.stdout and "active" in shown.stdout
    assert run("bob", "lane", "show", str(lane["id"])).exit_code == 1  # not bob's: 404
    assert run("alice", "lane", "release", str(lane["id"])).exit_code == 0
    assert "released" in run("alice", "lane", "show", str(lane["id"])).stdout


def test_failed_activation_exits_1(run, world):
    world.dataplane.fail_next = "no switch"
    r = run(
        "alice",
        "lane",
        "request",
        "--src",
        "10.1.0.10",
        "--dst",
        "203.0.113.10",
        "--dst-port",
        "9000",
        "--purpose",
        "x",
    )
    assert r.exit_code == 1 and "failed" in r.stdout and "no switch" in r.stdout


def test_operator_commands(run):
    r = run(
        "root",
        "grant",
        "create",
        "--principal",
        "bob",
        "--src",
        "10.1.0.20/32",
        "--dst",
        "0.0.0.0/0",
        "--protocol",
        "udp",
        "--ports",
        "5000-5010,53",
        "--max-duration",
        "60",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["ports"] == ["53", "5000-5010"]
    assert "bob" in run("root", "grant", "list").stdout
    created = run("root", "principal", "create", "carol", "--role", "researcher")
    assert created.exit_code == 0 and created.stdout.strip().splitlines()[-1].startswith("vl_")
    assert "carol" in run("root", "principal", "list").stdout
    assert run("root", "audit", "--action", "principal.create").exit_code == 0
    assert run("alice", "audit").exit_code == 1  # researchers may not
    assert run("root", "grant", "revoke", "1").exit_code == 0


def test_bad_input_is_one_line_not_a_traceback(run, tmp_path):
    r = run(
        "alice",
        "lane",
        "request",
        "--src",
        "10.1.0.10",
        "--dst",
        "203.0.113.10",
        "--dst-port",
        "9000",
        "--duration",
        "soon",
        "--purpose",
        "x",
    )
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    r = run(
        "alice",
        "lane",
        "request",
        "--src",
        "10.1.0.300",
        "--dst",
        "203.0.113.10",
        "--dst-port",
        "9000",
        "--purpose",
        "x",
    )
    assert r.exit_code == 1 and "src_ip: not an IPv4 or IPv6 address" in r.stderr and r.stderr.count("\n") == 1
    r = run("nope", "lane", "list")
    assert r.exit_code == 1 and "unauthorized" in r.stderr
    r = run("alice", "lane", "list", env={"VIPLANES_API_URL": "http://127.0.0.1:1"})
    assert r.exit_code == 3 and "cannot reach" in r.stderr
    r = run("", "lane", "list", env={"VIPLANES_TOKEN": ""})
    assert r.exit_code == 4 and "no token" in r.stderr  # 3 is "unreachable" (exitcodes.py)


def test_config_file(live, world, tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'api_url = "{live.url}"\ntoken = "{world.tokens["alice"]}"\n')
    r = CliRunner().invoke(
        main, ["principal", "whoami"], env={"VIPLANES_CONFIG": str(cfg), "VIPLANES_TOKEN": "", "VIPLANES_API_URL": ""}
    )
    assert r.exit_code == 0 and r.stdout.strip() == "alice (researcher)"
    cfg.write_text('api_url = "x"\ncolour = "blue"\n')
    r = CliRunner().invoke(main, ["principal", "whoami"], env={"VIPLANES_CONFIG": str(cfg)})
    assert r.exit_code == 5 and "unknown keys ['colour']" in r.stderr


def test_lane_request_ranges_prefixes_and_names(run):
    r = run(
        "alice",
        "lane",
        "request",
        "--src",
        "10.1.0.10",
        "--dst",
        "203.0.113.10",
        "--dst-ports",
        "9010-9020",
        "--purpose",
        "globus",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    lane = json.loads(r.stdout)
    assert lane["dst_ports"] == ["9010-9020"] and lane["match_count"] == 4 and lane["flow_count"] == 4 * 2 * 3 + 4
    r = run(
        "alice",
        "lane",
        "request",
        "--src",
        "10.1.0.10",
        "--dst-prefix",
        "203.0.113.64/26",
        "--dst-ports",
        "443,9030",
        "--purpose",
        "p",
        "--json",
    )
    assert r.exit_code == 0 and json.loads(r.stdout)["dst_nets"] == ["203.0.113.64/26"], r.stderr
    r = run(
        "alice",
        "lane",
        "request",
        "--src",
        "10.1.0.10",
        "--dst",
        "no-such-name.invalid",
        "--dst-port",
        "9000",
        "--purpose",
        "p",
    )
    assert r.exit_code == 1 and "dst_host_unresolvable" in r.stderr and r.stderr.count("\n") == 1
    r = run("alice", "lane", "list")
    assert r.exit_code == 0 and "9010-9020" in r.stdout
