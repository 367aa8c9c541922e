"""The one serve launcher's command line and its readiness failure (no serve started: a stand-in
child that exits or never answers)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from viplanes.lab.servechild import CLI, ServeChild, ServeChildError, ServeOptions, serve_argv


def test_the_command_line_names_only_what_was_asked() -> None:
    opts = ServeOptions("sqlite:///x.db", 8080, ("10.0.0.1", 6653))
    assert serve_argv(opts) == [
        *CLI,
        "serve",
        "--db",
        "sqlite:///x.db",
        "--api",
        "127.0.0.1:8080",
        "--openflow",
        "10.0.0.1:6653",
    ]


def test_every_option_lands_before_the_security_and_extra_args() -> None:
    opts = ServeOptions(
        "sqlite:///x.db",
        1,
        ("127.0.0.1", 2),
        dataplane="memory",
        tick=0.2,
        threads=8,
        topology=Path("/t.yaml"),
        security=("--of-cert", "c"),
        args=("--foo",),
    )
    argv = serve_argv(opts, cli=("py", "-c", "shim"))
    assert argv[:3] == ["py", "-c", "shim"]
    tail = argv[argv.index("127.0.0.1:2") + 1 :]
    assert tail == [
        "--dataplane",
        "memory",
        "--threads",
        "8",
        "--tick",
        "0.2",
        "--topology",
        "/t.yaml",
        "--of-cert",
        "c",
        "--foo",
    ]


def test_a_child_that_exits_fails_the_start_with_its_log(tmp_path: Path) -> None:
    child = ServeChild(
        "sqlite:///x.db", tmp_path, cli=(sys.executable, "-c", "print('no such thing'); raise SystemExit(3)")
    )
    with pytest.raises(ServeChildError, match=r"(?s)serve exited \(3\).*no such thing"):
        child.start(5)
    assert child.proc is not None and child.proc.returncode == 3


def test_a_child_that_never_answers_fails_within_the_timeout(tmp_path: Path) -> None:
    child = ServeChild("sqlite:///x.db", tmp_path, cli=(sys.executable, "-c", "import time; time.sleep(60)"))
    try:
        with pytest.raises(ServeChildError, match="not ready at /healthz after 0.5 s"):
            child.start(0.5)
    finally:
        child.stop(1)
    assert child.proc is not None and child.proc.poll() is not None
