"""Seed 003's download tools in the lab: scp and rsync over ssh, wget, aria2c.

The cloud host gets an sshd and a static HTTP server (`rclone serve http`, which answers range
requests, so aria2c can split a file over several connections). Both are the lab's own: the
sshd reads a config, a host key and an authorized-keys file written per run under the work
dir (never /etc/ssh, never the machine's sshd), accepts only that run's client key, and the
client pins that run's host key (no trust on first use). With a `wan:` section they listen on
the cloud's loopback like iperf3 and S3, and the WAN proxy owns their public ports.

The argv builders are pure (unit-tested); `run_file_tool` runs one download inside a lab host
and times it by the wall clock, as the seed's author did.
"""

from __future__ import annotations

import getpass
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mininet.node import Node

from .measure import Measurement, dir_bytes, mbps

SSH_PORT = 22
HTTP_PORT = 80
FILE_TOOLS = ("scp", "rsync", "wget", "aria2")
SSHD = "/usr/sbin/sshd"
MULTI_TOOLS = ("aria2",)  # tools that take `parallel` as their connection count


@dataclass(frozen=True)
class FileServices:
    """Where the cloud's ssh and HTTP servers listen, and the per-run keys a client needs."""

    ip: str
    ssh_port: int
    http_port: int
    user: str
    key: Path  # the client's private key (this run's only authorized key)
    known_hosts: Path  # this run's host key, pinned
    root: Path  # the HTTP server's document root on this machine

    def ssh_options(self, port_flag: str = "-p") -> list[str]:
        """ssh client options: this run's key and host key only, no prompt, no user config
        (scp spells the port ``-P``)."""
        return [
            "-F",
            "/dev/null",
            "-i",
            str(self.key),
            port_flag,
            str(self.ssh_port),
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-o",
            "ConnectTimeout=20",
        ]

    def url(self, path: Path) -> str:
        return f"http://{self.ip}:{self.http_port}/{path.relative_to(self.root).as_posix()}"


def sshd_config(ssh_dir: Path, bind: str, port: int, user: str) -> str:
    """A config that lets exactly ``user`` in with this run's key, nothing else."""
    return "\n".join(
        [
            f"Port {port}",
            f"ListenAddress {bind}",
            f"HostKey {ssh_dir / 'host_ed25519'}",
            f"PidFile {ssh_dir / 'sshd.pid'}",
            f"AuthorizedKeysFile {ssh_dir / 'authorized_keys'}",
            f"AllowUsers {user}",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            "PermitEmptyPasswords no",
            "AllowTcpForwarding no",
            "X11Forwarding no",
            "UsePAM no",
            # the work dir may sit under /tmp (world-writable), which StrictModes refuses; the
            # key files are ours, in a 0700 directory, 0600 each (prepare_ssh)
            "StrictModes no",
            "UseDNS no",
            "Subsystem sftp internal-sftp",
            "",
        ]
    )


def prepare_ssh(ssh_dir: Path, ip: str, port: int, bind: str) -> tuple[Path, Path, str]:
    """Per-run host and client keys, authorized_keys, known_hosts and the sshd config.

    Returns (config, client key, user)."""
    ssh_dir.mkdir(parents=True, exist_ok=True)
    ssh_dir.chmod(0o700)
    for name in ("host_ed25519", "client_ed25519"):
        key = ssh_dir / name
        for f in (key, key.with_suffix(".pub")):
            f.unlink(missing_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    host_pub = (ssh_dir / "host_ed25519.pub").read_text().split()
    authorized = ssh_dir / "authorized_keys"
    authorized.write_text((ssh_dir / "client_ed25519.pub").read_text())
    authorized.chmod(0o600)
    target = ip if port == 22 else f"[{ip}]:{port}"
    (ssh_dir / "known_hosts").write_text(f"{target} {host_pub[0]} {host_pub[1]}\n")
    user = getpass.getuser()
    config = ssh_dir / "sshd_config"
    config.write_text(sshd_config(ssh_dir, bind, port, user))
    return config, ssh_dir / "client_ed25519", user


def server_argvs(config: Path, rclone: str, root: Path, bind: str, http_port: int) -> list[list[str]]:
    """The sshd (foreground, log to stderr) and the static HTTP server."""
    return [
        [SSHD, "-D", "-e", "-f", str(config)],
        [rclone, "serve", "http", "--addr", f"{bind}:{http_port}", "--read-only", str(root)],
    ]


def start_file_services(
    spawn: Callable[[list[str], str], None],
    wait: Callable[[int], None],
    work_dir: Path,
    ip: str,
    bind: str,
    root: Path,
    rclone: str,
    ssh_port: int = SSH_PORT,
    http_port: int = HTTP_PORT,
) -> FileServices:
    """Start sshd and the HTTP server through ``spawn(argv, log_name)``; ``wait(port)`` until each listens."""
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    config, key, user = prepare_ssh(work_dir / "ssh", ip, ssh_port, bind)
    for argv, log in zip(server_argvs(config, rclone, root, bind, http_port), ("sshd.log", "http.log"), strict=True):
        spawn(argv, log)
    for port in (ssh_port, http_port):
        wait(port)
    return FileServices(ip, ssh_port, http_port, user, key, work_dir / "ssh" / "known_hosts", root)


def tool_argv(tool: str, svc: FileServices, remote: Path, local_dir: Path, parallel: int = 1) -> list[str]:
    """One download of ``remote`` (a file under the cloud's data dir) into ``local_dir``."""
    target = local_dir / remote.name
    if tool == "scp":
        return ["scp", "-q", *svc.ssh_options("-P"), f"{svc.user}@{svc.ip}:{remote}", str(target)]
    if tool == "rsync":  # the seed's flags, minus the progress output
        shell = " ".join(["ssh", *svc.ssh_options()])
        return ["rsync", "-az", "--stats", "-e", shell, f"{svc.user}@{svc.ip}:{remote}", str(target)]
    if tool == "wget":
        return ["wget", "-q", "--no-proxy", "-O", str(target), svc.url(remote)]
    if tool == "aria2":
        n = str(max(1, min(parallel, 16)))  # aria2c's most connections per server
        return [
            "aria2c",
            "-x",
            n,
            "-s",
            n,
            "-k",
            "1M",
            "--file-allocation=none",
            "--allow-overwrite=true",
            "--no-conf",
            "--console-log-level=warn",
            "--summary-interval=0",
            "--all-proxy=",
            "-d",
            str(local_dir),
            "-o",
            remote.name,
            svc.url(remote),
        ]
    raise ValueError(f"unknown file tool {tool!r} (known: {', '.join(FILE_TOOLS)})")


def run_file_tool(
    host: Node, tool: str, svc: FileServices, remote: Path, local_dir: Path, parallel: int = 1, timeout: float = 300
) -> Measurement:
    """Download one file with ``tool`` inside ``host``: bytes that arrived over wall-clock time."""
    from .measure import _run

    local_dir.mkdir(parents=True, exist_ok=True)
    argv = tool_argv(tool, svc, remote, local_dir, parallel)
    started = time.monotonic()
    out, err, code = _run(host, argv, timeout=timeout)
    wall = time.monotonic() - started
    got = dir_bytes(local_dir)
    if code != 0:
        last = (err.strip() or out.strip()).splitlines()[-1:] or [""]
        return Measurement(tool, got, wall, 0.0, False, f"{tool} exit code {code}: {last[0][:200]}")
    conns = int(parallel) if tool in MULTI_TOOLS else 1
    return Measurement(tool, got, wall, mbps(got, wall), True, extra={"connections": conns})
