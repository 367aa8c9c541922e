"""The listener's admission settings reach it from the command line (``--of-*``,
``--switch-deny-list``), with safe defaults when not given (issue 28, item 2 and 9)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from click.testing import CliRunner

from viplanes.cli.openflow_options import listener_security, openflow_security_options
from viplanes.controller.openflow.admission import Limits


def _command(seen: dict[str, Any]) -> click.Command:
    @click.command()
    @openflow_security_options
    def run(pki_dir: Path | None, insecure_tcp: bool, switch_cert_pins: tuple[str, ...]) -> None:
        seen["security"] = listener_security(pki_dir, insecure_tcp, switch_cert_pins, None)

    return run


def test_defaults_and_the_deny_list_beside_the_pki(campus_pki):
    seen: dict[str, Any] = {}
    r = CliRunner().invoke(_command(seen), ["--pki", str(campus_pki)])
    assert r.exit_code == 0, r.output
    sec = seen["security"]
    assert sec.limits == Limits()
    assert (sec.limits.unfinished_per_prefix, sec.limits.unfinished_total, sec.limits.max_switches) == (64, 128, 512)
    assert sec.deny_list == campus_pki / "denied-switches"


def test_options_set_the_caps_and_the_deny_list(campus_pki, tmp_path):
    seen: dict[str, Any] = {}
    args = ["--pki", str(campus_pki), "--of-unfinished-per-prefix", "4", "--of-unfinished-total", "16"]
    args += ["--of-max-switches", "40", "--of-handshake-timeout", "2.5", "--switch-deny-list", str(tmp_path / "d")]
    r = CliRunner().invoke(_command(seen), args)
    assert r.exit_code == 0, r.output
    limits = seen["security"].limits
    assert (limits.unfinished_per_prefix, limits.unfinished_total, limits.max_switches) == (4, 16, 40)
    assert limits.tls_handshake_timeout_s == 2.5 and seen["security"].deny_list == tmp_path / "d"


def test_a_nonsense_cap_is_one_readable_line(campus_pki):
    r = CliRunner().invoke(_command({}), ["--pki", str(campus_pki), "--of-unfinished-total", "0"])
    assert r.exit_code == 2 and "--of-unfinished-total" in r.output


def test_an_unreadable_deny_list_stops_the_start_with_one_line(campus_pki, tmp_path):
    """A deny-list the controller cannot read must not start a controller that denies nothing."""
    import shutil

    pki_dir = tmp_path / "pki"
    shutil.copytree(campus_pki, pki_dir)
    (pki_dir / "denied-switches").mkdir()  # the default path, not a readable file
    r = CliRunner().invoke(_command({}), ["--pki", str(pki_dir)])
    assert r.exit_code == 1 and "--switch-deny-list" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1
