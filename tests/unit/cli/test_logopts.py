"""--log-format/--log-level (and VIPLANES_LOG_FORMAT): one definition, on every long-running command."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from viplanes.cli.api import api
from viplanes.cli.controller import cluster, run
from viplanes.cli.osken import run as osken_run
from viplanes.cli.serve import serve

COMMANDS: list[click.Command] = [serve, api, run, cluster, osken_run]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_every_service_command_takes_the_shared_log_options(command: click.Command) -> None:
    params = {p.name: p for p in command.params if isinstance(p, click.Option)}
    assert params["log_format"].envvar == "VIPLANES_LOG_FORMAT"
    assert params["log_level"].envvar == "VIPLANES_LOG_LEVEL"


def test_an_unknown_format_is_a_usage_error_naming_the_option() -> None:
    r = CliRunner().invoke(serve, ["--log-format", "xml"])
    assert r.exit_code == 2 and "--log-format" in r.output and "xml" in r.output


def test_serve_writes_json_lines_when_the_environment_asks(tmp_path: Path) -> None:
    """A real ``viplanes serve``: its start-up warnings come out as JSON objects, one per line,
    and its refusal (the API port is taken) is still one readable line with exit code 1."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    env = {
        **os.environ,
        "VIPLANES_LOG_FORMAT": "json",
        "VIPLANES_DB_URL": f"sqlite:///{tmp_path / 'v.db'}",
    }
    env.pop("VIPLANES_UI_SECRET", None)
    try:
        out = subprocess.run(
            [sys.executable, "-m", "viplanes.cli.main", "serve", "--dataplane", "memory", "--api", f"127.0.0.1:{port}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        taken.close()
    assert out.returncode == 1, out.stderr
    logged = [json.loads(line) for line in out.stderr.splitlines() if line.startswith("{")]
    assert any(rec["logger"] == "viplanes.api.ui.session" and rec["level"] == "WARNING" for rec in logged), out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("Error: --api")
