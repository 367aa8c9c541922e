"""A bad VIPLANES_OIDC_* value stops `serve` / `api` with one readable line, not a traceback
(and never starts the API with provider sign-in silently off)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from viplanes.cli.main import main


@pytest.mark.parametrize(
    "env,says",
    [
        ({"VIPLANES_OIDC_ISSUER": "https://idp.test/realms/v"}, "audience"),
        (
            {
                "VIPLANES_OIDC_ISSUER": "https://idp.test/realms/v",
                "VIPLANES_OIDC_AUDIENCE": "viplanes-api",
                "VIPLANES_OIDC_GROUP_ROLES": "netops=admin",
            },
            "not roles",
        ),
    ],
)
@pytest.mark.parametrize("command", ["serve", "api"])
def test_bad_oidc_settings_are_one_line(tmp_path: Path, env: dict[str, str], says: str, command: str) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    args = ["serve", "--dataplane", "memory", "--db", db] if command == "serve" else ["api", "--db", db]
    r = CliRunner().invoke(main, args, env=env)
    assert r.exit_code == 78, r.output  # a configuration error (viplanes/cli/settingsload.py)
    assert "settings:" in r.output and says in r.output and "Traceback" not in r.output
