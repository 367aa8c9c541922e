"""Processes and ports for tests: the one ``free_port`` (the lab's), the one ``wait_for``, the
one ``stop_process`` (the product's), a controller subprocess. Cleans up what it starts."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tests.support.paths import REPO
from viplanes.lab.ports import free_port as free_port
from viplanes.lifecycle import stop_process as stop_process

T = TypeVar("T")


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a new listener could bind ``host``:``port`` now (connections left in TIME_WAIT do
    not hold it: the product's listeners set SO_REUSEADDR too)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def wait_healthy(proc: subprocess.Popen, url: str, log: Path, timeout: float) -> None:
    """Wait until ``url``/healthz answers OK; fail with the log's tail if ``proc`` exits or time runs out."""
    import requests  # only the serve tests need it

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{url}/healthz", timeout=1).ok:
                return
        except requests.RequestException:  # not listening yet, or too busy starting to answer in 1 s
            time.sleep(0.1)
        if proc.poll() is not None:
            break
    raise AssertionError(f"serve did not come up:\n{log.read_text()[-3000:]}")


def lab_security_args() -> list[str]:
    """`viplanes serve`/`controller run`/launcher options for OpenFlow over TLS with the
    machine-wide lab PKI, which the shared ovs-vswitchd presents on ``ssl:`` controllers."""
    from viplanes.lab.labpki import ensure_lab_pki

    return ensure_lab_pki().serve_args()


def lab_security(topology: object) -> object:
    """The same, as the ``security`` of an in-process ``EmbeddedController``."""
    from viplanes.cli.openflow_options import listener_security
    from viplanes.lab.labpki import ensure_lab_pki

    lab = ensure_lab_pki()
    return listener_security(lab.dir, False, [lab.vswitchd_pin], topology)


def wait_for(
    check: Callable[[], T],
    timeout: float,
    step: float = 0.05,
    *,
    what: str = "",
    ignore: tuple[type[Exception], ...] = (),
) -> T | None:
    """Poll ``check()`` until it returns something truthy and return that value; None when
    ``timeout`` runs out, or an AssertionError naming ``what`` when the caller gave one.
    Exceptions of the ``ignore`` types count as "not yet" (a page mid-reload, a port not open)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except ignore:
            value = None
        if value:
            return value
        if time.monotonic() >= deadline:
            if what:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            return None
        time.sleep(step)


class ControllerProcess:
    """`python -m viplanes.cli.osken` as a child process with its log in a file."""

    def __init__(self, log_path: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def start(self) -> ControllerProcess:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "viplanes.cli.osken",
                    "--listen",
                    f"127.0.0.1:{self.port}",
                    *lab_security_args(),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                env=dict(os.environ),
            )
        self._wait_listening(60.0)  # os-ken's imports alone took seconds at load 9 on 2 cores
        return self

    def _wait_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc and self.proc.poll() is not None:
                raise RuntimeError(f"controller exited early:\n{self.log_path.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"controller not listening on {self.port}")

    def connected_dpids(self) -> set[int]:
        """Switches the controller itself reports as connected (from its log)."""
        text = self.log_path.read_text(errors="replace")
        connected: set[int] = set()
        for kind, dpid in re.findall(r"switch (connected|disconnected) dpid=(\d+)", text):
            (connected.add if kind == "connected" else connected.discard)(int(dpid))
        return connected

    def wait_for_dpids(self, dpids: set[int], timeout: float = 15.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if dpids <= self.connected_dpids():
                return True
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        stop_process(self.proc, 5)
