"""Distinct exit codes for "API unreachable", "no token" and "bad config file", documented in one
table; every command has help text, and every option of `grant` and `lane` says what it is."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from viplanes.cli import exitcodes
from viplanes.cli.main import main

ROOT = Path(__file__).resolve().parents[3]


def _run(*args: str, **env: str) -> click.testing.Result:
    base = {"VIPLANES_CONFIG": "/nonexistent", "VIPLANES_TOKEN": "t", "VIPLANES_API_URL": "http://127.0.0.1:1"}
    return CliRunner().invoke(main, list(args), env={**base, **env})


def test_unreachable_no_token_and_bad_config_differ(tmp_path):
    unreachable = _run("lane", "list")
    no_token = _run("lane", "list", VIPLANES_TOKEN="")
    cfg = tmp_path / "config.toml"
    cfg.write_text('colour = "blue"\n')
    bad_config = _run("lane", "list", VIPLANES_CONFIG=str(cfg), VIPLANES_TOKEN="")
    assert (unreachable.exit_code, no_token.exit_code, bad_config.exit_code) == (3, 4, 5)
    assert "cannot reach" in unreachable.stderr and "no token" in no_token.stderr
    assert "colour" in bad_config.stderr
    for r in (unreachable, no_token, bad_config):
        assert r.stderr.count("\n") == 1  # one readable line


def test_the_documented_table_is_the_code():
    text = (ROOT / "docs/operating.md").read_text()
    rows = dict(re.findall(r"^\| (\d+) \| (.+) \|$", text, re.M))
    assert {int(k): v for k, v in rows.items()} == exitcodes.TABLE
    assert len(set(exitcodes.TABLE)) == len(exitcodes.TABLE) == 8


def _walk(cmd: click.Command, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(cmd)
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            assert sub is not None, (path, name)
            yield from _walk(sub, (*path, name))
    yield path, cmd


COMMANDS = list(_walk(main, ("viplanes",)))


@pytest.mark.parametrize("path,cmd", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_command_has_help(path, cmd):
    assert (cmd.help or "").strip(), f"{' '.join(path)} has no help text"
    if path[1:2] in (("grant",), ("lane",)):
        bare = [p.name for p in cmd.params if isinstance(p, click.Option) and not p.help and p.name != "help"]
        assert not bare, f"{' '.join(path)}: options without help {bare}"


def test_grant_create_help_shows_an_example():
    r = CliRunner().invoke(main, ["grant", "create", "--help"])
    assert r.exit_code == 0 and "--max-duration" in r.output and "Example" in r.output
