"""`viplanes serve` as a child process: the one launcher the lab, the tests and the benchmarks use.

Each of them used to build its own command line, log and readiness wait (five copies), and they
drifted: different stop graces, /healthz or /readyz, a retry on a taken port in one only. Here the
command line is pure data (:func:`serve_argv`, unit-tested) and the process glue is one class.
"""

from __future__ import annotations

import http.client
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from viplanes.lifecycle import stop_process

from .ports import free_port

# what serve's log says when a port picked as free was taken before serve bound it
_PORT_TAKEN = ("in use", "busy")


class ServeChildError(RuntimeError):
    """serve exited or did not become ready in time; the message ends with its log's tail."""


@dataclass(frozen=True)
class ServeOptions:
    """What `viplanes serve` is started with; None leaves serve's own default."""

    db_url: str
    api_port: int
    openflow: tuple[str, int]
    dataplane: str | None = None  # "memory" for API-only runs; serve's default is OpenFlow
    tick: float | None = None
    threads: int | None = None
    topology: Path | None = None
    security: tuple[str, ...] = ()  # OpenFlow TLS options (LabPKI.serve_args); () is serve's default
    args: tuple[str, ...] = ()  # any further serve options


# how the viplanes CLI is run: this interpreter (another checkout's, or a shim around it, may replace it)
CLI = (sys.executable, "-m", "viplanes.cli.main")


def serve_argv(opts: ServeOptions, cli: Sequence[str] = CLI) -> list[str]:
    """The command line for ``opts``."""
    argv = [*cli, "serve", "--db", opts.db_url]
    argv += ["--api", f"127.0.0.1:{opts.api_port}", "--openflow", f"{opts.openflow[0]}:{opts.openflow[1]}"]
    if opts.dataplane is not None:
        argv += ["--dataplane", opts.dataplane]
    if opts.threads is not None:
        argv += ["--threads", str(opts.threads)]
    if opts.tick is not None:
        argv += ["--tick", f"{opts.tick:g}"]
    if opts.topology is not None:
        argv += ["--topology", str(opts.topology)]
    return [*argv, *opts.security, *opts.args]


def _answers(port: int, path: str) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        conn.request("GET", path)
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


class ServeChild:
    """One `viplanes serve` child: started, waited for, killed or stopped, started again on the
    same database and ports (a restart keeps the OpenFlow port the switches point at)."""

    def __init__(
        self,
        db_url: str,
        workdir: Path,
        *,
        openflow: tuple[str, int] | None = None,
        dataplane: str | None = None,
        tick: float | None = None,
        threads: int | None = None,
        topology: Path | None = None,
        security: Sequence[str] = (),
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cli: Sequence[str] = CLI,
        cwd: Path | None = None,
        ready_path: str = "/healthz",
        ready_s: float = 30.0,
        log_name: str | None = None,
    ) -> None:
        self.db_url = db_url
        self.api_port = free_port()
        self._pick_of_port = openflow is None  # only a port we picked may change on a retry
        self.of_host, self.of_port = openflow or ("127.0.0.1", free_port())
        self.dataplane, self.tick, self.threads, self.topology = dataplane, tick, threads, topology
        self.security, self.args = tuple(security), tuple(args)
        self.env = dict(env) if env is not None else None
        self.cli, self.cwd = tuple(cli), cwd
        self.ready_path, self.ready_s = ready_path, ready_s
        self.log = workdir / (log_name or f"serve-{self.api_port}.log")
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0  # time.perf_counter() at the last launch
        self.ready_after_s = 0.0  # launch to ready, the last start (the fault tests report it)
        self.ready_after_s = 0.0  # launch to ready, the last start (the fault tests report it)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def options(self) -> ServeOptions:
        return ServeOptions(
            self.db_url,
            self.api_port,
            (self.of_host, self.of_port),
            self.dataplane,
            self.tick,
            self.threads,
            self.topology,
            self.security,
            self.args,
        )

    def launch(self) -> None:
        """Start serve without waiting for it."""
        with open(self.log, "ab") as log:
            self.started_at = time.perf_counter()
            self.proc = subprocess.Popen(
                serve_argv(self.options(), self.cli),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
            )

    def wait_ready(self, timeout: float | None = None) -> float:
        """Seconds from launch until ``ready_path`` answered 200; ServeChildError when serve exits
        or ``timeout`` (default ``ready_s``) runs out."""
        deadline = time.monotonic() + (self.ready_s if timeout is None else timeout)
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise ServeChildError(f"serve exited ({code}):\n{self.tail()}")
            if _answers(self.api_port, self.ready_path):
                self.ready_after_s = time.perf_counter() - self.started_at
                return self.ready_after_s
            time.sleep(0.05)
        raise ServeChildError(
            f"serve not ready at {self.ready_path} after {timeout or self.ready_s:g} s:\n{self.tail()}"
        )

    def start(self, timeout: float | None = None) -> ServeChild:
        """Launch and wait until ready. A port taken between picking it and serve's bind (another
        process on a shared machine) costs one retry on fresh ports."""
        self.launch()
        try:
            self.wait_ready(timeout)
        except ServeChildError as exc:
            if not any(word in str(exc) for word in _PORT_TAKEN) or (self.proc and self.proc.poll() is None):
                self.stop()
                raise
            self.api_port = free_port()
            if self._pick_of_port:
                self.of_port = free_port()
            self.launch()
            self.wait_ready(timeout)
        return self

    def kill(self, sig: int = signal.SIGKILL, wait_s: float = 15) -> None:
        """Send ``sig`` (SIGKILL: a crash, no goodbye to the switches) and reap; SIGKILL if the
        child outlives ``wait_s``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def stop(self, grace_s: float = 30) -> int | None:
        """SIGTERM, SIGKILL after ``grace_s``; the exit code (None when never started). An idle
        serve stops in ~4-5 s at load 13 (scheduler, watchers, os-ken joins)."""
        if self.proc is None:
            return None
        stop_process(self.proc, grace_s)
        return self.proc.returncode

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def rss_mb(self) -> float | None:
        """Resident memory of serve (controller + API + store), MiB."""
        if self.proc is None:
            return None
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        except OSError:
            return None
        return None

    def add_operator(self, name: str = "root") -> str:
        """An operator made with the CLI on serve's database (what a first install does); its token."""
        out = subprocess.run(
            [
                *self.cli,
                "principal",
                "add",
                name,
                "--role",
                "operator",
                "--db",
                self.db_url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=self.env,
            cwd=self.cwd,
        )
        if out.returncode != 0 or not out.stdout.strip():
            raise ServeChildError(f"principal add {name}: {(out.stderr or out.stdout).strip()[-300:]}")
        return out.stdout.strip().splitlines()[-1].strip()
