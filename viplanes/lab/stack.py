"""The VIP Lanes service the lab talks to: `viplanes serve` in a subprocess, plus the people in it.

The lab uses the product as its users do: an operator is bootstrapped on the database with the
CLI, creates a researcher and a grant over the REST API, and the researcher requests and releases
lanes over the REST API with their own token.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from viplanes.client.http import ApiClient, ApiError
from viplanes.config import ClientConfig
from viplanes.lifecycle import stop_process
from viplanes.topologies.loader import load_topology

from .ctzones import ZoneClaim, claim_for_env
from .labpki import LabPKI, LabPKIError, ensure_lab_pki
from .ports import free_port
from .servechild import ServeChild, ServeChildError
from .services import clean_env

OPERATOR = "lab-operator"
RESEARCHER = "lab-researcher"


class StackError(RuntimeError):
    """The service could not be started or refused what the lab asked."""


@dataclass
class Stack:
    """A running `viplanes serve` (or an external one) and the tokens the lab acts with."""

    api_url: str
    openflow: tuple[str, int]
    researcher_token: str
    operator_token: str | None = None
    proc: subprocess.Popen | None = None
    log_path: Path | None = None
    _lanes: list[int] = field(default_factory=list)
    zone_claim: ZoneClaim | None = None  # this run's conntrack zones (ctzones), held until stop

    def client(self, token: str | None = None) -> ApiClient:
        return ApiClient(ClientConfig(api_url=self.api_url, token=token or self.researcher_token))

    def request_lane(
        self,
        src_ip: str,
        dst_ip: str,
        dst_port: int,
        duration_s: int,
        purpose: str,
        protocol: str = "tcp",
        timeout_s: float = 20.0,
    ) -> dict[str, Any]:
        """Ask for a lane as the researcher and wait until it is active (StackError otherwise)."""
        api = self.client()
        try:
            lane = api.request_lane(
                {
                    "src_ip": src_ip,
                    "dst_ip": dst_ip,
                    "protocol": protocol,
                    "dst_port": dst_port,
                    "duration_s": duration_s,
                    "purpose": purpose,
                }
            )
            self._lanes.append(int(lane["id"]))
            lane = api.wait_lane(lane, timeout_s)
        except ApiError as exc:
            raise StackError(f"lane {src_ip}->{dst_ip}:{dst_port} refused: {exc}") from None
        if lane["state"] != "active":
            raise StackError(f"lane {lane['id']} is {lane['state']}: {lane.get('reason') or '?'}")
        return lane

    def release_lane(self, lane_id: int) -> None:
        try:
            self.client().call("POST", f"/lanes/{lane_id}/release")
        except ApiError as exc:
            if exc.status not in (404, 409):  # already gone is fine
                raise StackError(f"release of lane {lane_id} failed: {exc}") from None
        if lane_id in self._lanes:
            self._lanes.remove(lane_id)

    def stop(self) -> None:
        for lane_id in list(self._lanes):
            try:
                self.release_lane(lane_id)
            except StackError:
                pass
        stop_process(self.proc, grace_s=10)
        if self.zone_claim is not None:
            self.zone_claim.release()

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_stack(
    topology_path: Path,
    work_dir: Path,
    src_prefixes: Sequence[str],
    dst_prefixes: Sequence[str],
    ports: Sequence[str],
    max_duration_s: int = 3600,
    max_lanes: int = 8,
) -> Stack:
    """Start `viplanes serve` on free local ports with a fresh SQLite database, and bootstrap
    an operator, a researcher and the researcher's grant."""
    work_dir.mkdir(parents=True, exist_ok=True)
    db = work_dir / "viplanes.db"
    db.unlink(missing_ok=True)
    db_url = f"sqlite:///{db}"
    env = clean_env({"VIPLANES_DB_URL": db_url})
    env.pop("VIPLANES_TOKEN", None)
    env.pop("VIPLANES_API_URL", None)
    serve = ServeChild(
        db_url, work_dir, topology=topology_path, security=_lab_pki().serve_args(), env=env, log_name="serve.log"
    )
    try:
        operator_token = serve.add_operator(OPERATOR)
    except ServeChildError as exc:
        raise StackError(f"operator bootstrap failed: {exc}") from None
    claim = claim_for_env(env, load_topology(topology_path), f"{os.getpid()}:{work_dir}")
    try:
        serve.start(30)
    except BaseException as exc:
        if claim is not None:
            claim.release()
        if isinstance(exc, ServeChildError):
            raise StackError(f"viplanes serve did not start: {exc}") from None
        raise
    stack = Stack(serve.url, (serve.of_host, serve.of_port), "", operator_token, serve.proc, serve.log)
    stack.zone_claim = claim
    try:
        op = stack.client(operator_token)
        researcher = op.call("POST", "/principals", json={"name": RESEARCHER, "role": "researcher"})
        stack.researcher_token = researcher["token"]
        op.call(
            "POST",
            "/grants",
            json={
                "principal": RESEARCHER,
                "src_prefixes": list(src_prefixes),
                "dst_prefixes": list(dst_prefixes),
                "protocols": ["tcp"],
                "ports": list(ports),
                "max_duration_s": max_duration_s,
                "max_lanes": max_lanes,
            },
        )
    except BaseException as exc:
        stack.stop()
        if isinstance(exc, ApiError):
            raise StackError(f"bootstrap over the API failed: {exc}") from None
        raise
    return stack


def _lab_pki() -> LabPKI:
    """OpenFlow over TLS with the lab's machine-wide PKI (the switches use it too)."""
    try:
        return ensure_lab_pki()
    except (LabPKIError, OSError) as exc:
        raise StackError(f"lab PKI: {exc}") from None


def start_controller_only(work_dir: Path) -> tuple[subprocess.Popen, tuple[str, int]]:
    """The minimal os-ken launcher (default forwarding only), for default-path runs."""
    port = free_port()
    lab_pki = _lab_pki()
    log = (work_dir / "controller.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "viplanes.cli.osken", "--listen", f"127.0.0.1:{port}", *lab_pki.serve_args()],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=clean_env(),
    )
    log.close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise StackError(f"controller exited ({proc.returncode}); see {work_dir}/controller.log")
        try:
            socket.create_connection(("127.0.0.1", port), 0.3).close()
            return proc, ("127.0.0.1", port)
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise StackError("controller did not listen within 20s")
