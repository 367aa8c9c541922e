"""`pki switch` must not lead an operator to cut another controller's switches off: set-ssl
replaces the one SSL setting of a shared ovs-vswitchd (issue 29)."""

from __future__ import annotations

from click.testing import CliRunner

from viplanes.cli.main import main


def test_pki_switch_says_check_get_ssl_before_set_ssl(tmp_path):
    runner = CliRunner()
    d = tmp_path / "p"
    assert runner.invoke(main, ["pki", "init", "--dir", str(d)]).exit_code == 0
    r = runner.invoke(main, ["pki", "switch", "--dir", str(d), "--name", "h", *(["--dpid", "1", "--dpid", "2"])])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    get = next(i for i, x in enumerate(lines) if x.strip().startswith("ovs-vsctl get-ssl"))
    put = next(i for i, x in enumerate(lines) if x.strip().startswith("ovs-vsctl set-ssl"))
    assert get < put and "REPLACES" in lines[get] and "every bridge" in lines[get]
    assert "do not replace" in r.output and "A vswitchd shared with others" in r.output
