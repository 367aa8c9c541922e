"""The cloud host's services: an iperf3 server and a real S3 endpoint (`rclone serve s3`).

Both run inside the cloud host's namespace and are killed at lab teardown. Clients reach the S3
endpoint through an rclone remote named ``cloud`` defined by environment variables, so no config
file is written anywhere. With a `wan:` section in the topology, both listen on the cloud host's
loopback and the WAN model's pacing proxy (`wan/proxy.py`) owns their public ports, so every
connection to them is capped at ``wan.per_connection_mbps``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mininet.node import Node

from viplanes.lifecycle import stop_process
from viplanes.settings.environ import child_environment
from viplanes.topologies.model import Wan

from .filetools import FileServices, start_file_services
from .net import LabNetwork
from .wan.endpoint import EndpointShape

REPO = Path(__file__).resolve().parents[2]
IPERF_PORT = 5201
S3_PORT = 9000
BUCKET = "lab"
# Fixed lab credentials: the endpoint lives in a private namespace of a throwaway lab.
ACCESS_KEY = "viplanes-lab"
SECRET_KEY = "viplanes-lab-secret"


RCLONE_BUILDS = (REPO / "tools" / "bin" / "rclone", Path("/tmp/rclonebuild/bin/rclone"))


def rclone_binary() -> str:
    """rclone >= 1.65 (it has `serve s3`): the repo's build first, then PATH."""
    for candidate in RCLONE_BUILDS:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("rclone")
    if found and "serve s3" not in _help(found):
        found = None
    if not found:
        raise RuntimeError("rclone 1.68 (with `serve s3`) not found: make setup builds tools/bin/rclone")
    return found


def _help(binary: str) -> str:
    out = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True)
    return "serve s3" if "  s3 " in out.stdout else ""


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for lab tools: ours, minus AWS_CA_BUNDLE (it breaks rclone's S3 backend)."""
    return child_environment(extra, drop=("AWS_CA_BUNDLE",), drop_prefixes=("RCLONE_",))


@dataclass(frozen=True)
class CloudServices:
    """Where the cloud services listen, and what a client needs to use them."""

    ip: str
    iperf_port: int
    s3_port: int
    bucket: str
    data_dir: Path  # the S3 backend's directory on this machine: <data_dir>/<bucket>/...
    per_connection_mbps: float | None = None  # the WAN model's cap; None: no cap
    files: FileServices | None = None  # seed 003's sshd and HTTP server (start with file_tools=True)

    @property
    def endpoint(self) -> str:
        return f"http://{self.ip}:{self.s3_port}"

    def rclone_env(self) -> dict[str, str]:
        """Environment defining the rclone remote ``cloud:`` for a client host."""
        return clean_env(
            {
                "RCLONE_CONFIG_CLOUD_TYPE": "s3",
                "RCLONE_CONFIG_CLOUD_PROVIDER": "Rclone",
                "RCLONE_CONFIG_CLOUD_ACCESS_KEY_ID": ACCESS_KEY,
                "RCLONE_CONFIG_CLOUD_SECRET_ACCESS_KEY": SECRET_KEY,
                "RCLONE_CONFIG_CLOUD_ENDPOINT": self.endpoint,
                "RCLONE_CONFIG_CLOUD_FORCE_PATH_STYLE": "true",
            }
        )


def start_cloud_services(
    lab: LabNetwork,
    work_dir: Path,
    host_name: str | None = None,
    iperf_port: int = IPERF_PORT,
    s3_port: int = S3_PORT,
    file_tools: bool = False,
) -> CloudServices:
    """Start iperf3 and S3 on the cloud host (behind the WAN proxy if the topology has a `wan`);
    they stop with the lab. ``file_tools`` adds seed 003's sshd and HTTP server (`filetools.py`)."""
    name = host_name or next(h.name for h in lab.topology.hosts if h.role == "cloud")
    host = lab.host(name)
    ip = str(lab.topology.host(name).iface.ip.ip)
    wan = lab.topology.wan
    bind = ip
    if wan is not None:  # the services move to loopback; the proxy takes their public ports
        host.cmd("ip link set lo up")
        bind = "127.0.0.1"
    data_dir = work_dir / "s3"
    (data_dir / BUCKET).mkdir(parents=True, exist_ok=True)
    logs = work_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    procs = [
        _spawn(lab, host, ["iperf3", "-s", "-B", bind, "-p", str(iperf_port)], logs / "iperf3-server.log"),
        _spawn(
            lab,
            host,
            [
                rclone_binary(),
                "serve",
                "s3",
                "--addr",
                f"{bind}:{s3_port}",
                "--auth-key",
                f"{ACCESS_KEY},{SECRET_KEY}",
                str(data_dir),
            ],
            logs / "rclone-serve-s3.log",
        ),
    ]
    for port in (iperf_port, s3_port):
        _wait_listening(host, bind, port, procs)
    files = None
    if file_tools:

        def spawn(argv: list[str], log: str) -> None:
            procs.append(_spawn(lab, host, argv, logs / log))

        def wait(port: int) -> None:
            _wait_listening(host, bind, port, procs)

        files = start_file_services(spawn, wait, work_dir, ip, bind, data_dir, rclone_binary())
    service_ports = {"iperf3": iperf_port, "s3": s3_port}
    if files is not None:
        service_ports |= {"ssh": files.ssh_port, "http": files.http_port}
    ports = list(service_ports.values())
    if wan is not None:
        proxy = _spawn(
            lab,
            host,
            [
                sys.executable,
                "-m",
                "viplanes.lab.wan.proxy",
                "--mbps",
                f"{wan.per_connection_mbps:g}",
                *wan_options(wan, s3_port, service_ports),
                "--verbose",
                *(a for port in ports for a in ("--forward", f"{ip}:{port}={bind}:{port}")),
            ],
            logs / "wanproxy.log",
        )
        for port in ports:
            _wait_listening(host, ip, port, [proxy])
    return CloudServices(
        ip, iperf_port, s3_port, BUCKET, data_dir, wan.per_connection_mbps if wan is not None else None, files
    )


def wan_options(wan: Wan, s3_port: int, service_ports: dict[str, int] | None = None) -> list[str]:
    """The proxy's options for the topology's `wan:` section (the S3 port carries the storage
    model); ``service_ports`` (service -> listen port) places the running services' endpoints."""
    argv = ["--burst-kb", f"{wan.burst_kb:g}", "--up-mbps", f"{wan.up:g}", "--down-mbps", f"{wan.down:g}"]
    argv += ["--rtt-ms", f"{wan.rtt_ms:g}", "--window-kb", f"{wan.window_kb:g}"]
    if wan.request_ms > 0 or wan.read_ms > 0 or wan.write_rps > 0:
        argv += ["--request-ms", f"{wan.request_ms:g}", "--storage-workers", str(wan.storage_workers)]
        if wan.read_ms != wan.request_ms:
            argv += ["--read-request-ms", f"{wan.read_ms:g}"]
        if wan.write_rps > 0:
            argv += ["--write-rps", f"{wan.write_rps:g}"]
        argv += ["--storage-port", str(s3_port)]
    for e in wan.endpoints:
        ports = tuple(service_ports[s] for s in e.services if service_ports and s in service_ports)
        if ports:
            argv += ["--endpoint", EndpointShape(ports, e.up_mbps, e.down_mbps, e.total_mbps).text()]
    return argv


def _spawn(lab: LabNetwork, host: Node, argv: list[str], log: Path) -> subprocess.Popen:
    out = log.open("ab")
    proc = host.popen(argv, stdout=out, stderr=subprocess.STDOUT, env=clean_env())
    out.close()
    lab.track_pid(proc.pid)

    def stop() -> None:
        stop_process(proc, grace_s=3)

    lab.on_stop(stop)
    return proc


def _wait_listening(host: Node, ip: str, port: int, procs: list[subprocess.Popen], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                # Mininet's popen runs ``mnexec -cda PID argv...``: show the argv
                argv = proc.args[3:] if isinstance(proc.args, list) else proc.args
                raise RuntimeError(f"cloud service {argv!r} exited with {proc.returncode}")
        if f"{ip}:{port}" in host.cmd(f"ss -Hltn 'sport = :{port}'"):
            return
        time.sleep(0.2)
    raise RuntimeError(f"cloud service on {ip}:{port} did not start within {timeout:.0f}s")
