"""scripts/check-units (run by `make test`) passes the shipped units and fails a weakened one.

The attack each case stands for: an edit that quietly drops the sandbox (a unit copied from a
blog, a typo in a key systemd only warns about, one line deleted "to debug") ships without
anyone noticing, because systemd still starts the service.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "setup.py").is_file())
UNITS = ROOT / "deploy" / "systemd"
SERVICES = sorted(p.name for p in UNITS.glob("*.service"))

pytestmark = pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")


def check(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / "scripts" / "check-units"), str(directory)], capture_output=True, text=True, timeout=120
    )


def copy_with(tmp_path: Path, edit: dict[str, tuple[str, str]]) -> Path:
    """The shipped directory with ``edit[unit] = (pattern, replacement)`` applied (re.M)."""
    out = tmp_path / "units"
    shutil.copytree(UNITS, out)
    for name, (pattern, repl) in edit.items():
        path = out / name
        text, n = re.subn(pattern, repl, path.read_text(), flags=re.M)
        assert n, f"{pattern!r} not in {name}"
        path.write_text(text)
    return out


def test_the_shipped_units_verify_and_score_ok_or_better() -> None:
    assert SERVICES == ["viplanes-api.service", "viplanes-controller.service", "viplanes.service"]
    r = check(UNITS)
    assert r.returncode == 0, r.stderr
    for name in SERVICES:
        assert re.search(rf"{re.escape(name)}: exposure \d\.\d (OK|SAFE)", r.stdout), r.stdout


def test_a_unit_with_the_sandbox_removed_fails(tmp_path: Path) -> None:
    stripped = copy_with(tmp_path, {"viplanes.service": (r"^# Sandbox(.|\n)*?^UMask=0077\n", "User=viplanes\n")})
    r = check(stripped)
    assert r.returncode == 1
    assert re.search(r"viplanes\.service: exposure \d+\.\d (MEDIUM|EXPOSED|UNSAFE)", r.stderr), r.stderr


def test_a_misspelt_key_fails_although_systemd_would_only_warn(tmp_path: Path) -> None:
    typo = copy_with(tmp_path, {"viplanes-api.service": (r"^ProtectSystem=strict$", "ProtectSytem=strict")})
    r = check(typo)
    assert r.returncode == 1
    assert "Unknown key 'ProtectSytem'" in r.stderr and 'no line "ProtectSystem=strict"' in r.stderr


def test_one_hardening_line_removed_fails_even_if_the_score_stays_ok(tmp_path: Path) -> None:
    weaker = copy_with(tmp_path, {"viplanes-controller.service": (r"^MemoryDenyWriteExecute=yes\n", "")})
    r = check(weaker)
    assert r.returncode == 1 and 'viplanes-controller.service: no line "MemoryDenyWriteExecute=yes"' in r.stderr


@pytest.mark.parametrize(
    ("unit", "line", "says"),
    [
        (
            "viplanes.service",
            "Environment=VIPLANES_DB_URL=sqlite:////var/lib/viplanes/viplanes.db",
            "sets the environment",
        ),
        ("viplanes-api.service", "EnvironmentFile=/etc/viplanes/viplanes.env", "sets the environment"),
        (
            "viplanes.service",
            "ExecStart=/opt/viplanes/bin/viplanes serve --api 127.0.0.1:8080",
            "ExecStart= passes flags",
        ),
    ],
)
def test_a_setting_beside_the_config_file_fails(tmp_path: Path, unit: str, line: str, says: str) -> None:
    """The unit once set VIPLANES_DB_URL and --api, which beat viplanes.toml: the service ran on
    SQLite at 127.0.0.1:8080 while `config show` and doctor read the file's PostgreSQL."""
    edit = (r"^ExecStart=.*$", line) if line.startswith("ExecStart=") else (r"^(ExecStart=.*)$", rf"{line}\n\1")
    r = check(copy_with(tmp_path, {unit: edit}))
    assert r.returncode == 1 and f"{unit}: {says}" in r.stderr, r.stderr


def test_the_units_run_the_bare_subcommands() -> None:
    execs = {n: re.findall(r"^ExecStart=(.*)$", (UNITS / n).read_text(), re.M) for n in SERVICES}
    assert execs == {
        "viplanes-api.service": ["/opt/viplanes/bin/viplanes api"],
        "viplanes-controller.service": ["/opt/viplanes/bin/viplanes controller cluster"],
        "viplanes.service": ["/opt/viplanes/bin/viplanes serve"],
    }


def test_a_capability_granted_fails(tmp_path: Path) -> None:
    """None of the three needs a capability (ports above 1024, files group-readable)."""
    cap = copy_with(
        tmp_path, {"viplanes.service": (r"^CapabilityBoundingSet=$", "CapabilityBoundingSet=CAP_NET_ADMIN")}
    )
    r = check(cap)
    assert r.returncode == 1 and 'viplanes.service: no line "CapabilityBoundingSet="' in r.stderr


def test_a_wrong_binary_path_fails(tmp_path: Path) -> None:
    moved = copy_with(tmp_path, {"viplanes.service": (r"/opt/viplanes/bin/viplanes", "/usr/local/bin/viplanes")})
    r = check(moved)
    assert r.returncode == 1 and "is not executable" in r.stderr


def test_the_state_directory_is_private_to_the_service_user(tmp_path: Path) -> None:
    loose = copy_with(tmp_path, {"viplanes.tmpfiles.conf": (r"^d /var/lib/viplanes 0700", "d /var/lib/viplanes 0755")})
    r = check(loose)
    assert r.returncode == 1 and "/var/lib/viplanes is 755, not 700" in r.stderr
