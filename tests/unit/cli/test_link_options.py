"""The live links' settings (VIPLANES_LINK_*) come from the one settings table, parsed with every
other setting (a bad value: one line, exit 78), and a ``--link-*`` option overrides its setting
as the other options do. Before, click read the variables itself: a bad value was a usage error
(exit 2) and ``config show`` and the command disagreed on where the value came from."""

from __future__ import annotations

from typing import Any

import click
from click.testing import CliRunner

from viplanes.cli.openflow_options import link_settings, openflow_security_options
from viplanes.cli.settingsload import process_settings


@click.command()
@openflow_security_options
def links(**_: Any) -> None:
    """A command with the OpenFlow options that prints the link settings it would use."""
    got = link_settings(process_settings())
    click.echo(f"{got.hold_down_s:g} {got.max_hold_down_s:g} {got.probe_s:g}")


def run(args: list[str], env: dict[str, str]) -> Any:
    return CliRunner().invoke(links, args, env=env, standalone_mode=True)


def test_the_settings_give_the_values_and_an_option_overrides_its_own() -> None:
    env = {"VIPLANES_LINK_PROBE_S": "7", "VIPLANES_LINK_HOLD_DOWN_S": "3"}
    assert run([], env).output.split() == ["3", "60", "7"]
    assert run(["--link-probe-interval", "0.5"], env).output.split() == ["3", "60", "0.5"]
    assert run([], {}).output.split() == ["2", "60", "1"]  # the table's defaults


def test_a_bad_link_setting_is_one_line_and_exit_78() -> None:
    result = run([], {"VIPLANES_LINK_PROBE_S": "soon"})
    assert result.exit_code == 78, result.output
    assert result.output.strip().splitlines() == [
        "error: settings: VIPLANES_LINK_PROBE_S='soon': expected a number from 0 to 3600"
    ]
    result = run([], {"VIPLANES_LINK_HOLD_DOWN_S": "30", "VIPLANES_LINK_MAX_HOLD_DOWN_S": "10"})
    assert result.exit_code == 78, result.output
    assert "VIPLANES_LINK_MAX_HOLD_DOWN_S=10: must be at least VIPLANES_LINK_HOLD_DOWN_S (30)" in result.output


def test_options_that_contradict_are_a_usage_error() -> None:
    result = run(["--link-hold-down", "30", "--link-max-hold-down", "10"], {})
    assert result.exit_code == 2 and "--link-max-hold-down" in result.output
