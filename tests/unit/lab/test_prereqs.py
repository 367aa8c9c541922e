"""`viplanes lab shell` checks its tools before building the campus (~40 s): without rclone it
stops at once with one readable line."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from viplanes.cli import labshell
from viplanes.lab import prereqs, services


def test_missing_lists_each_tool_and_its_package() -> None:
    lines = prereqs.missing(which=lambda _tool: None, rclone=lambda: "/usr/bin/rclone")
    assert "iperf3 not found on PATH (Debian package iperf3; make setup installs it)" in lines
    assert len(lines) == len(prereqs.TOOLS)  # no OVS check without ovs-vsctl


def test_shell_without_rclone_fails_fast(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(services, "RCLONE_BUILDS", ())  # the repo's build is not there either
    monkeypatch.setattr(labshell, "need_root", lambda: None)
    monkeypatch.setattr(prereqs, "ovs_running", lambda: True)
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in prereqs.TOOLS:  # every other tool present, rclone not
        (bare / tool).write_text("#!/bin/sh\nexit 0\n")
        (bare / tool).chmod(0o755)
    monkeypatch.setenv("PATH", str(bare))
    t0 = time.monotonic()
    r = CliRunner().invoke(labshell.shell, ["--work-dir", str(tmp_path / "w")])
    took = time.monotonic() - t0
    assert r.exit_code == 1, r.output
    assert r.stderr == "Error: rclone 1.68 (with `serve s3`) not found: make setup builds tools/bin/rclone\n"
    assert took < 2.0, took
    assert not (tmp_path / "w").exists()  # nothing was built
    assert os.environ["PATH"] == str(bare)
