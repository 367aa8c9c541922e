"""The peers' own venv (bench/.peers-venv, never the product's .venv) and their processes.

Pins: ``faucet==1.10.12`` requires ``os-ken==3.1.0`` (bench/.peers-venv); the REST app runs from
os-ken 1.4.1, the last release that ships it, in bench/.peers-rest-venv through
``bench/harness/ofctl_rest_launch.py``. Python 3.11 from PATH, PyPI through pip. A peer that cannot be
installed or imported raises :class:`PeerUnavailable` with the reason; the benchmark prints it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from bench.harness.ovs import openflow_scheme

BENCH_DIR = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("BENCH_PEERS_VENV", BENCH_DIR / ".peers-venv"))
REQUIREMENTS = ["faucet==1.10.12", "os-ken==3.1.0"]
# os-ken 3.x ships no REST apps; 1.4.1 is the last os-ken with ofctl_rest. It pins nothing that
# clashes with Faucet's os-ken 3.1, but one package cannot be two versions: a venv of its own.
REST_VENV = Path(os.environ.get("BENCH_PEERS_REST_VENV", BENCH_DIR / ".peers-rest-venv"))
REST_REQUIREMENTS = ["os-ken==1.4.1"]
REST_LAUNCHER = Path(__file__).resolve().with_name("ofctl_rest_launch.py")
PEER_MODULES = {"ofctl_rest": "os_ken.app.ofctl_rest", "faucet": "faucet.faucet"}


class PeerUnavailable(RuntimeError):
    """This peer cannot be installed or started here; the message says why."""


def _last_lines(text: str, n: int = 3) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])[-400:]


def _ensure(venv: Path, requirements: list[str]) -> Path:
    """The venv's python, created and filled on first use (idempotent: pip is skipped when the
    pinned versions are already there)."""
    py = venv / "bin" / "python"
    if not py.exists():
        base = shutil.which("python3.11")
        if base is None:
            raise PeerUnavailable("python3.11 not on PATH")
        out = subprocess.run([base, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise PeerUnavailable(f"venv: {_last_lines(out.stderr)}")
    pinned = dict(r.split("==") for r in requirements)
    if {k: v for k, v in versions(py).items() if k in pinned} != pinned:
        out = subprocess.run(
            [str(py), "-m", "pip", "install", "-q", *requirements], capture_output=True, text=True, timeout=600
        )
        if out.returncode != 0:
            raise PeerUnavailable(f"pip install {' '.join(requirements)}: {_last_lines(out.stderr)}")
    return py


def ensure_venv() -> Path:
    """Faucet 1.10.12 and its os-ken 3.1.0."""
    return _ensure(VENV, REQUIREMENTS)


def ensure_rest_venv() -> Path:
    """os-ken 1.4.1, for its ofctl_rest."""
    return _ensure(REST_VENV, REST_REQUIREMENTS)


def versions(py: Path) -> dict[str, str]:
    """Installed versions of the peers' main packages (empty when the venv is not usable)."""
    code = (
        "import importlib.metadata as m, json\n"
        "out = {}\n"
        "for d in ('faucet', 'os-ken', 'eventlet'):\n"
        "    try: out[d] = m.version(d)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))"
    )
    try:
        out = subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=60)
    except OSError:
        return {}
    if out.returncode != 0:
        return {}
    import json

    found = json.loads(out.stdout)
    found.pop("eventlet", None)
    return found


def check_importable(py: Path, peer: str) -> None:
    cmd = (
        [str(py), str(REST_LAUNCHER), "--import-check"]
        if peer == "ofctl_rest"
        else [str(py), "-c", f"import {PEER_MODULES[peer]}"]
    )
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise PeerUnavailable(f"import {PEER_MODULES[peer]}: {_last_lines(out.stderr, 1)}")


def osken_manager_args(py: Path, of_port: int, launcher: Path | None = None) -> list[str]:
    """``osken-manager`` listening on ``of_port`` the way ``bench.harness.ovs.of_target`` connects:
    TLS with the lab PKI's controller certificate (switch certificates checked against the lab
    CA), or plain TCP with BENCH_OPENFLOW=tcp."""
    start = [str(py), str(launcher)] if launcher else [str(py.parent / "osken-manager")]
    args = [*start, "--ofp-listen-host", "127.0.0.1"]
    if openflow_scheme() == "ssl":
        from viplanes.lab.labpki import ensure_lab_pki

        lab = ensure_lab_pki()
        args += [
            "--ofp-ssl-listen-port",
            str(of_port),
            "--ctl-privkey",
            str(lab.dir / "controller.key"),
            "--ctl-cert",
            str(lab.dir / "controller.crt"),
            "--ca-certs",
            str(lab.ca),
        ]
    else:
        args += ["--ofp-tcp-listen-port", str(of_port)]
    return args


class PeerProcess:
    """One peer controller process with its log in ``log``; SIGTERM then SIGKILL on stop."""

    def __init__(self, cmd: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.cmd, self.log = cmd, log
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None

    def start(self) -> PeerProcess:
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(self.cmd, stdout=fh, stderr=fh, env=self.env, cwd="/")
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(sig)

    def tail(self, chars: int = 1500) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        if not self.alive():
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def wait_http(port: int, path: str, timeout_s: float, proc: PeerProcess) -> None:
    """Until ``GET path`` on 127.0.0.1:port answers at all (any status)."""
    import http.client

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not proc.alive():
            raise PeerUnavailable(f"exited: {_last_lines(proc.tail(), 4)}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            time.sleep(0.1)
    raise PeerUnavailable(f"no HTTP answer on {port} after {timeout_s} s: {_last_lines(proc.tail(), 4)}")
