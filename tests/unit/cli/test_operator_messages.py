"""The CLI's messages that misled in issue 40, one test each: each names what is wrong and what
to do (switches not connected, a duplicate of the caller's own active lane, `api` without a
database, raw floats), and a provider that is down is one readable line with its own exit code."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.live import LiveServer
from tests.support.world import World
from viplanes.cli import exitcodes
from viplanes.cli.client import show_record
from viplanes.cli.main import main

LANE = ["lane", "request", "--src", "10.1.0.10", "--dst", "203.0.113.10", "--dst-port", "9000", "--purpose", "x"]


def cli(*args: str, **env: str) -> Any:
    return CliRunner().invoke(main, list(args), env={"VIPLANES_CONFIG": "/nonexistent", **env})


def test_no_switch_connected_says_so_and_whose_matter_it_is(live: LiveServer, world: World) -> None:
    world.dataplane.away = ["s1", "s2", "s3", "s4"]
    r = cli(*LANE, VIPLANES_API_URL=live.url, VIPLANES_TOKEN=world.tokens["alice"])
    assert r.exit_code == exitcodes.REFUSED, r.output
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert "no switch is connected to the controller" in line and "s1, s2, s3, s4" in line
    assert "network operators" in line and "Your request is fine" in line


def test_some_switches_away_are_named(live: LiveServer, world: World) -> None:
    world.dataplane.away = ["s2"]
    world.dataplane.readiness = lambda: {  # type: ignore[method-assign]
        "ready": False,
        "switches": [{"name": "s1", "connected": True}, {"name": "s2", "connected": False}],
    }
    r = cli(*LANE, VIPLANES_API_URL=live.url, VIPLANES_TOKEN=world.tokens["alice"])
    assert "switches this lane needs are not connected" in r.stderr and ": s2." in r.stderr, r.stderr
    assert "no switch is connected" not in r.stderr


def test_transfer_on_the_callers_own_identical_lane_uses_it(live: LiveServer, world: World) -> None:
    first = world.lane(dst_port=9000)
    assert first.status_code == 201, first.json
    own = first.json["id"]
    r = cli(
        "transfer",
        "--api-url",
        live.url,
        "--token",
        world.tokens["alice"],
        "--src",
        "10.1.0.10",
        "--dst",
        "203.0.113.10",
        "--dst-ports",
        "9000",
        "--protocol",
        "tcp",
        "--",
        "sh",
        "-c",
        "exit 4",
    )
    assert r.exit_code == 4, r.output
    assert f"your lane {own} for this flow is already active: the command runs on it" in r.stderr, r.stderr
    assert "firewall" not in r.stderr and "duplicate_lane" not in r.stderr
    shown = world.client.get(f"/api/v1/lanes/{own}", headers=world.h("alice")).json
    assert shown["state"] == "active"  # not the transfer's to release


def test_api_without_a_database_names_the_settings() -> None:
    r = cli("api")
    assert r.exit_code == exitcodes.USAGE, r.output
    assert r.stderr.count("\n") == 1, r.stderr
    assert "VIPLANES_DB_URL" in r.stderr and "[db]" in r.stderr and "--db" in r.stderr


def test_lane_records_round_their_floats(capsys: pytest.CaptureFixture[str]) -> None:
    show_record({"id": 7, "activation_ms": 37.54107099996418, "rate_mbps": 12.5, "ratio": 0.123456789})
    out = capsys.readouterr().out
    assert re.search(r"^activation_ms\s+37\.5$", out, re.M), out
    assert re.search(r"^rate_mbps\s+12\.5$", out, re.M) and re.search(r"^ratio\s+0\.123457$", out, re.M), out


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_login_with_the_provider_down_is_one_readable_line(tmp_path: Path) -> None:
    issuer = f"http://127.0.0.1:{_closed_port()}/realms/campus"
    r = cli("login", "--issuer", issuer, XDG_CONFIG_HOME=str(tmp_path))
    assert r.exit_code == exitcodes.UNREACHABLE, r.output
    assert r.stderr == (
        f"error: cannot reach the identity provider at {issuer}: connection refused; "
        "is it running, and is [oidc] issuer (or --issuer) right?\n"
    )


def test_login_help_says_it_is_the_device_code_flow() -> None:
    r = cli("login", "--help")
    assert "OAuth device-code flow" in r.output and "enter the code" in r.output
    assert "device-code flow" in cli("--help").output


def test_a_fresh_database_warns_nothing(tmp_path: Path) -> None:
    """The lower(name) index of principals cannot be reflected on SQLite; the migrations' batch
    steps must not reflect that table (an SAWarning on every new database, in JSON logs too)."""
    from alembic import command

    from viplanes.store.db import Database
    from viplanes.store.migrations import alembic_config

    db = Database(f"sqlite:///{tmp_path / 'fresh.db'}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        db.create_all()
        command.downgrade(alembic_config(db.engine), "0003")  # and each batch step down and up again
        command.upgrade(alembic_config(db.engine), "head")
    db.dispose()


def test_top_level_help_imports_no_server_library() -> None:
    code = (
        "import sys\n"
        "from viplanes.cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in ('sqlalchemy', 'networkx', 'flask', 'os_ken') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    took = time.monotonic() - t0
    assert "HEAVY []" in out, out
    assert "transfer" in out and "login" in out  # the list is still complete
    print(f"viplanes --help in a fresh interpreter: {took:.2f} s")


def test_top_level_summaries_are_the_commands_own() -> None:
    import click

    from viplanes.cli.main import COMMANDS, SUMMARIES

    ctx = click.Context(main)
    assert set(SUMMARIES) == set(COMMANDS)
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        assert command is not None
        assert SUMMARIES[name] == command.get_short_help_str(1000), name
