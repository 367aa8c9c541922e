"""Where a transfer command sends its data: the destination `viplanes transfer` asks a lane for.

Pure functions over ``argv`` (and, for a named rclone remote, its configuration): the researcher
types the command they always type and the wrapper finds the far end.

- ``iperf3 -c HOST [-p PORT] [-u]``                       -> HOST, PORT (5201), tcp/udp
- ``scp [-P PORT] ... [user@]HOST:path`` / ``scp://``      -> HOST, PORT (22)
- ``rsync ... [user@]HOST:path`` (ssh, 22; ``-e 'ssh -p N'``), ``HOST::module`` / ``rsync://`` (873)
- ``rclone ... REMOTE:path``: the S3/HTTP/WebDAV endpoint of REMOTE, from
  ``RCLONE_CONFIG_<REMOTE>_ENDPOINT``/``_URL``, else ``rclone config show REMOTE``; and the
  connection-string form ``:s3,endpoint=http://host:9000:bucket`` (or ``REMOTE,endpoint=...:``)
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from viplanes.domain.values import is_decimal


@dataclass(frozen=True)
class Destination:
    host: str  # a DNS name or an address
    port: int
    protocol: str = "tcp"
    how: str = ""  # for the researcher: where the wrapper found it


class NoDestination(ValueError):
    """The command's destination could not be found; the message says what to pass instead."""


RcloneConfig = Callable[[str], str]  # remote name -> `rclone config show REMOTE` text


def _tool(argv: Sequence[str]) -> str:
    return os.path.basename(argv[0]) if argv else ""


def _opt(args: Sequence[str], short: str | None, long: str | None) -> str | None:
    """Value of ``-p 5202``, ``-p5202``, ``--port 5202`` or ``--port=5202`` (last one wins)."""
    found = None
    for i, arg in enumerate(args):
        if short and arg == short and i + 1 < len(args):
            found = args[i + 1]
        elif short and arg.startswith(short) and len(arg) > len(short) and not arg.startswith("--"):
            found = arg[len(short) :]
        elif long and arg == long and i + 1 < len(args):
            found = args[i + 1]
        elif long and arg.startswith(long + "="):
            found = arg[len(long) + 1 :]
    return found


def _port(text: str | None, default: int, what: str) -> int:
    if text is None:
        return default
    if not is_decimal(text) or not 1 <= int(text) <= 65535:
        raise NoDestination(f"{what}: {text!r} is not a port")
    return int(text)


def _strip_user(host: str) -> str:
    host = host.rsplit("@", 1)[-1]
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def iperf3(args: Sequence[str]) -> Destination:
    host = _opt(args, "-c", "--client")
    if not host:
        raise NoDestination("iperf3 without -c HOST is a server; give --dst")
    udp = any(a in ("-u", "--udp") for a in args)
    return Destination(host, _port(_opt(args, "-p", "--port"), 5201, "iperf3 -p"), "udp" if udp else "tcp", "iperf3 -c")


_REMOTE = re.compile(r"^(?:(?P<user>[^@/:]+)@)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(?!:)")


def _remote_host(args: Sequence[str], skip_values: set[str]) -> str | None:
    """First ``[user@]host:path`` operand (not a local path with a colon after a slash)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in skip_values:
            skip = True
            continue
        if arg.startswith("-") or "/" in arg.split(":", 1)[0]:
            continue
        m = _REMOTE.match(arg)
        if m:
            return _strip_user(m.group("host"))
    return None


def scp(args: Sequence[str]) -> Destination:
    for arg in args:
        if arg.startswith("scp://"):
            u = urlsplit(arg)
            if u.hostname:
                return Destination(u.hostname, u.port or 22, "tcp", "scp:// URL")
    host = _remote_host(args, {"-P", "-i", "-o", "-F", "-c", "-l", "-S", "-J"})
    if host is None:
        raise NoDestination("no [user@]host:path in the scp command; give --dst")
    return Destination(host, _port(_opt(args, "-P", None), 22, "scp -P"), "tcp", "scp host:path")


def rsync(args: Sequence[str]) -> Destination:
    for arg in args:
        if arg.startswith("rsync://"):
            u = urlsplit(arg)
            if u.hostname:
                return Destination(u.hostname, u.port or 873, "tcp", "rsync:// URL")
        m = re.match(r"^(?:[^@/:]+@)?([A-Za-z0-9._-]+)::", arg)
        if m and not arg.startswith("-"):
            return Destination(m.group(1), 873, "tcp", "rsync host::module")
    host = _remote_host(args, {"-e", "--rsh", "--port", "-T", "--temp-dir"})
    if host is None:
        raise NoDestination("no [user@]host:path in the rsync command; give --dst")
    rsh = _opt(args, "-e", "--rsh") or ""
    port = _opt(shlex.split(rsh), "-p", None) if rsh else None
    return Destination(host, _port(port, 22, "rsync -e 'ssh -p'"), "tcp", "rsync host:path over ssh")


def _endpoint_url(url: str, what: str) -> Destination:
    if "://" not in url:
        url = "https://" + url  # S3 endpoints are often given without a scheme
    u = urlsplit(url)
    if not u.hostname:
        raise NoDestination(f"{what}: no host in endpoint {url!r}")
    return Destination(u.hostname, u.port or (80 if u.scheme == "http" else 443), "tcp", what)


def _conn_params(spec: str) -> dict[str, str]:
    """``s3,endpoint='http://h:9000',provider=Minio`` -> {"endpoint": ..., "provider": ...}."""
    out: dict[str, str] = {}
    for part in re.findall(r"""(?:[^,'"]|'[^']*'|"[^"]*")+""", spec)[1:]:
        key, _, value = part.partition("=")
        out[key.strip().lower().replace("-", "_")] = value.strip().strip("'\"")
    return out


_RCLONE_VALUE_OPTS = {
    "--config",
    "--transfers",
    "--checkers",
    "--log-file",
    "--s3-chunk-size",
    "--drive-chunk-size",
    "--bwlimit",
    "--include",
    "--exclude",
    "--filter",
    "--log-level",
}


def _rclone_remote(args: Sequence[str]) -> str | None:
    """The first ``REMOTE:path`` or ``:backend,...:path`` operand (local paths have no colon, or a
    slash before it)."""
    skip = False
    for arg in args[1:] if args and not args[0].startswith("-") else args:  # args[0] is the subcommand
        if skip:
            skip = False
            continue
        if arg in _RCLONE_VALUE_OPTS:
            skip = True
            continue
        if arg.startswith("-"):
            continue
        head = re.match(r"^(:?[^:/\\,]+(?:,(?:[^,:'\"]|'[^']*'|\"[^\"]*\")*)*):", arg)
        if head and not (len(head.group(1)) == 1 and head.group(1).isalpha()):  # not C:\
            return head.group(1)
    return None


def _config_show(remote: str) -> str:
    try:
        r = subprocess.run(["rclone", "config", "show", remote], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return r.stdout if r.returncode == 0 else ""


def rclone(args: Sequence[str], env: Mapping[str, str], config_show: RcloneConfig = _config_show) -> Destination:
    remote = _rclone_remote(args)
    if remote is None:
        raise NoDestination("no REMOTE:path in the rclone command; give --dst")
    name, params = remote, {}
    if "," in remote:
        name, params = remote.split(",", 1)[0], _conn_params(remote)
    for key in ("endpoint", "url"):
        if params.get(key):
            return _endpoint_url(params[key], f"rclone {remote.split(',')[0] or ':'} {key}=")
    if name.startswith(":"):
        raise NoDestination(f"rclone backend {name} without endpoint=; give --dst")
    env_name = re.sub(r"[^A-Za-z0-9]", "_", name).upper()
    for key in ("ENDPOINT", "URL"):
        value = env.get(f"RCLONE_CONFIG_{env_name}_{key}")
        if value:
            return _endpoint_url(value, f"RCLONE_CONFIG_{env_name}_{key}")
    text = config_show(name)
    for key in ("endpoint", "url"):
        m = re.search(rf"^\s*{key}\s*=\s*(\S+)\s*$", text, re.M)
        if m:
            return _endpoint_url(m.group(1), f"rclone config show {name} ({key})")
    raise NoDestination(
        f"rclone remote {name!r} has no endpoint or url (a cloud provider's default "
        "endpoint is not guessed); give --dst"
    )


def derive(
    argv: Sequence[str], env: Mapping[str, str] | None = None, config_show: RcloneConfig = _config_show
) -> Destination:
    """The destination of ``argv``; NoDestination when the tool is unknown or names none."""
    env = os.environ if env is None else env
    tool, args = _tool(argv), list(argv[1:])
    if tool == "iperf3":
        return iperf3(args)
    if tool == "scp":
        return scp(args)
    if tool == "rsync":
        return rsync(args)
    if tool == "rclone":
        return rclone(args, env, config_show)
    raise NoDestination(
        f"cannot tell where {tool or 'the command'} sends data; give --dst (an address or a host name) and --dst-ports"
    )


RCLONE_DEFAULT_TRANSFERS = 4


def rclone_advice(argv: Sequence[str], cores: int | None = None) -> str | None:
    """What the lab measured about rclone's parallel transfers, when the command sets none."""
    if _tool(argv) != "rclone" or any(a == "--transfers" or a.startswith("--transfers=") for a in argv):
        return None
    cores = cores or os.cpu_count() or 1
    # rclone's default is already 4: only a machine with more cores has more to gain from more
    more = (
        f"Consider --transfers {cores} and, for large files,"
        if cores > RCLONE_DEFAULT_TRANSFERS
        else f"Its default (--transfers {RCLONE_DEFAULT_TRANSFERS}) already covers them; for large files, consider"
    )
    return (
        f"rclone runs {RCLONE_DEFAULT_TRANSFERS} parallel transfers unless told otherwise. Measured (PEARC'18, "
        "seed 000 §4): parallel transfers matter more than chunk size - DTN uploads went 425/651/1077/1187 "
        "Mbit/s with 4/8/16/32 transfers, but 556/727/1046/1062 Mbit/s with 4/8/16/32 MB chunks - and they only "
        f"help up to the number of cores (here {cores}). {more} --s3-chunk-size 16M (S3) or "
        "--drive-chunk-size 16M. Your command runs unchanged."
    )
