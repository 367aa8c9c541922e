"""MemoryDenyWriteExecute=yes in the units: does ``viplanes serve`` (CPython, os-ken, OpenSSL,
SQLAlchemy, waitress) run without writable+executable memory?

systemd implements the setting with a seccomp filter; the kernel's own switch since Linux 6.3,
``prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN)``, refuses the same mappings and is what this
machine can apply without a running systemd. A dependency that needs W+X pages (a JIT, a libffi
closure without static trampolines) would fail here rather than on an operator's host."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.procs import free_port

CHILD = """
import ctypes, mmap, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(65, 1, 0, 0, 0) != 0:  # PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN
    print("mdwe unsupported", ctypes.get_errno(), flush=True); sys.exit(77)
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    print("mdwe not enforced", flush=True); sys.exit(78)
except PermissionError:
    print("mdwe on", flush=True)
from viplanes.cli.main import main
sys.argv = ["viplanes"] + sys.argv[1:]
main()
"""


def test_serve_with_tls_openflow_runs_with_write_xor_execute(tmp_path: Path) -> None:
    api, of = free_port(), free_port()
    env = {**os.environ, "VIPLANES_DB_URL": f"sqlite:///{tmp_path / 'v.db'}", "VIPLANES_LOG_FORMAT": "json"}
    env["VIPLANES_RETENTION_EXPORT_DIR"] = str(tmp_path / "archive")
    pki = tmp_path / "pki"
    subprocess.run(
        [sys.executable, "-m", "viplanes.cli.main", "pki", "init", "--dir", str(pki)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            "serve",
            "--pki",
            str(pki),
            "--api",
            f"127.0.0.1:{api}",
            "--openflow",
            f"127.0.0.1:{of}",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        if first == "mdwe unsupported":
            pytest.skip("this kernel has no PR_SET_MDWE (Linux < 6.3)")
        assert first == "mdwe on", first
        deadline = time.monotonic() + 60
        body = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{api}/healthz", timeout=2) as r:
                    body = json.loads(r.read())
                    break
            except OSError:
                time.sleep(0.2)
        assert body is not None, proc.stderr.read() if proc.poll() is not None and proc.stderr else "no answer"
        with socket.create_connection(("127.0.0.1", of), timeout=5):
            pass  # the OpenFlow TLS listener (os-ken) is up in the same process
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
