"""A client-only install (`pip install viplanes`, the [client] extra) runs the API commands and
`transfer`, and a server command there names the extra it needs instead of a traceback.

The attack stood for: an operator hands a researcher the CLI; before, `viplanes lane --help`
imported SQLAlchemy and joserfc through viplanes.config, so it needed the whole server stack,
and `viplanes serve` on a light install died with ModuleNotFoundError. Here the server's modules
are hidden from a child interpreter (None in sys.modules), as in a venv built
from the [client] extra; tests/integration/test_wheel_client.py does it with a real venv."""

from __future__ import annotations

import subprocess
import sys

import pytest

from viplanes.cli.extras import NEEDS_EXTRA_EXIT, extra_for

SERVER_ONLY = ["os_ken", "flask", "sqlalchemy", "alembic", "psycopg2", "matplotlib", "joserfc", "authlib", "yaml"]

RUNNER = """
import sys

for name in sys.argv[1].split(","):
    sys.modules[name] = None  # as if not installed: import raises ModuleNotFoundError, find_spec says None
from viplanes.cli.main import main
main(sys.argv[2:], prog_name="viplanes")
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env_free = {"VIPLANES_CONFIG": "/nonexistent/viplanes.toml", "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", RUNNER, ",".join(SERVER_ONLY), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env_free,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["lane", "--help"],
        ["transfer", "--help"],
        ["lane", "request", "--help"],
        ["--help"],
        ["login", "--help"],
        ["logout", "--help"],
        ["auto", "--help"],
        ["grant", "create", "--help"],
    ],
)
def test_client_commands_work_without_the_server_stack(args: list[str]) -> None:
    out = run(*args)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr


def test_a_server_command_names_the_extra_in_one_line() -> None:
    for args in (
        ["serve", "--pki", "/x"],
        ["db", "upgrade"],
        ["serve", "--help"],
        ["principal", "add", "b", "--role", "operator"],
    ):
        out = run(*args)
        assert out.returncode == NEEDS_EXTRA_EXIT, (args, out.returncode, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1, out.stderr
        assert "needs viplanes[server]" in lines[0] and "pip install 'viplanes[server]'" in lines[0]


def test_the_command_list_shows_what_is_missing() -> None:
    out = run("--help")
    serve = next(line for line in out.stdout.splitlines() if line.strip().startswith("serve"))
    assert "needs viplanes[server]" in serve


def test_lab_modules_point_at_the_lab_extra() -> None:
    assert extra_for("matplotlib.pyplot") == "lab" and extra_for("os_ken.base") == "server"


def test_version_is_the_package_s() -> None:
    import viplanes

    out = run("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"viplanes, version {viplanes.__version__}"
