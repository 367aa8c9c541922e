"""The wheel installed with only [client] into a venv without the system's site-packages: the
researcher's install. `viplanes --version`, `lane --help` and `transfer --help` work, os-ken,
Flask, SQLAlchemy, psycopg2 and matplotlib are not there, and a server command names the extra
it needs in one line (exit 69). Needs PyPI (or the warm cache of tests/support/wheel.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import viplanes
from tests.support.wheel import build_wheel, fresh_venv
from viplanes.cli.extras import NEEDS_EXTRA_EXIT

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _require_ovs() -> None:
    """This module needs pip and PyPI, not Open vSwitch (overrides the conftest's check)."""


SERVER_ONLY = ["os_ken", "flask", "sqlalchemy", "psycopg2", "matplotlib", "alembic", "joserfc"]


def test_the_client_extra_is_light_and_says_what_servers_need(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "dist")
    bindir = fresh_venv(tmp_path / "venv", wheel, "client")
    exe = str(bindir / "viplanes")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "VIPLANES_CONFIG": str(tmp_path / "none.toml")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)

    version = run("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"viplanes, version {viplanes.__version__}"
    for args in (["lane", "--help"], ["transfer", "--help"], ["lane", "request", "--help"], ["--help"]):
        out = run(*args)
        assert out.returncode == 0 and "Traceback" not in out.stderr, (args, out.stderr)

    probe = "import importlib.util as u, sys; print(','.join(m for m in sys.argv[1:] if u.find_spec(m)))"
    present = subprocess.run([str(bindir / "python"), "-c", probe, *SERVER_ONLY], capture_output=True, text=True)
    assert present.returncode == 0 and present.stdout.strip() == "", (
        f"server modules in a client install: {present.stdout}"
    )

    serve = run("serve", "--pki", "/nonexistent")
    assert serve.returncode == NEEDS_EXTRA_EXIT, serve.stderr
    assert serve.stderr.strip() == (
        "error: viplanes serve: this command needs viplanes[server] (no module os_ken): pip install 'viplanes[server]'"
    )
