"""Run iperf3 and rclone inside lab hosts, and parse what they print.

The parsers are pure (text in, frozen facts out) and tested on outputs captured from real runs
(tests/unit/fixtures/lab/). Throughput of an rclone transfer is bytes moved over wall-clock time
around the whole command, as the paper measured with `time`.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mininet.node import Node


class MeasureError(RuntimeError):
    """A tool failed or printed something we cannot read."""


@dataclass(frozen=True)
class IperfResult:
    """iperf3's receiver-side view of one test (upload or, with -R, download)."""

    bytes: int
    seconds: float
    mbps: float
    streams: int
    reverse: bool
    retransmits: int | None


@dataclass(frozen=True)
class RcloneStats:
    """rclone's final accounting line (``--use-json-log -v``)."""

    bytes: int
    transfers: int
    errors: int
    elapsed_s: float
    last_error: str | None = None


@dataclass(frozen=True)
class Measurement:
    """One transfer as the experiment runner records it."""

    tool: str
    bytes: int
    seconds: float
    mbps: float
    ok: bool
    error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def parse_iperf3_json(text: str) -> IperfResult:
    """The result of ``iperf3 -J``; MeasureError if iperf3 reported an error or printed no JSON."""
    try:
        data = json.loads(text)
    except ValueError:
        raise MeasureError(f"iperf3 printed no JSON: {text[:200]!r}") from None
    if not isinstance(data, dict):
        raise MeasureError("iperf3 JSON is not an object")
    if data.get("error"):
        raise MeasureError(f"iperf3: {data['error']}")
    try:
        received = data["end"]["sum_received"]
        sent = data["end"].get("sum_sent", {})
        test = data["start"]["test_start"]
        return IperfResult(
            bytes=int(received["bytes"]),
            seconds=float(received["seconds"]),
            mbps=float(received["bits_per_second"]) / 1e6,
            streams=int(test["num_streams"]),
            reverse=bool(test.get("reverse", 0)),
            retransmits=sent.get("retransmits"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MeasureError(f"iperf3 JSON lacks {exc}") from None


def parse_rclone_jsonlog(text: str) -> RcloneStats:
    """The last stats record of an rclone ``--use-json-log -v`` run (its final accounting)."""
    stats = None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record.get("stats"), dict):
            stats = record["stats"]
    if stats is None:
        raise MeasureError(f"rclone printed no stats: {text[-300:]!r}")
    try:
        return RcloneStats(
            bytes=int(stats["bytes"]),
            transfers=int(stats["transfers"]),
            errors=int(stats["errors"]),
            elapsed_s=float(stats["elapsedTime"]),
            last_error=stats.get("lastError") or None,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MeasureError(f"rclone stats lack {exc}") from None


def rclone_messages(text: str, level: str = "error") -> list[str]:
    """Messages at one log level from an rclone JSON log (for a readable failure reason)."""
    out = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("level") == level:
            out.append(str(record.get("msg", "")).strip())
    return out


def mbps(nbytes: int, seconds: float) -> float:
    return nbytes * 8 / seconds / 1e6 if seconds > 0 else 0.0


# --- runners (I/O glue) -----------------------------------------------------------------------


def iperf3_argv(server_ip: str, port: int, parallel: int, seconds: float, download: bool) -> list[str]:
    argv = ["iperf3", "-c", server_ip, "-p", str(port), "-J", "-P", str(parallel), "-t", f"{seconds:g}"]
    return argv + (["-R"] if download else [])


# What iperf3 prints when its server is still closing the previous test. Behind the WAN
# proxy the proxy accepts the control connection, so the client may see it closed instead of
# "busy" (a clean-clone CI run: "control socket has closed unexpectedly", 0 bytes, at once).
_NOT_READY = ("server is busy", "control socket has closed unexpectedly")


def _server_not_ready(out: str) -> bool:
    """The run did not start because of the server: its JSON is an error like those above and
    it measured nothing (a test that broke off midway is a result, not retried)."""
    try:
        data = json.loads(out)
    except ValueError:
        return False
    if not isinstance(data, dict) or not any(m in str(data.get("error", "")) for m in _NOT_READY):
        return False
    received = (data.get("end") or {}).get("sum_received") or {}
    return not received.get("bytes")


def run_iperf3(host: Node, server_ip: str, port: int, parallel: int, seconds: float, download: bool) -> Measurement:
    argv = iperf3_argv(server_ip, port, parallel, seconds, download)
    for _ in range(3):
        out, err, _ = _run(host, argv, timeout=seconds + 30)
        if not _server_not_ready(out):
            break
        time.sleep(1.0)
    try:
        res = parse_iperf3_json(out)
    except MeasureError as exc:
        return Measurement("iperf3", 0, 0.0, 0.0, False, f"{exc} {err.strip()[:200]}".strip())
    return Measurement(
        "iperf3", res.bytes, res.seconds, res.mbps, True, extra={"retransmits": res.retransmits, "streams": res.streams}
    )


def rclone_argv(
    binary: str,
    src: str,
    dst: str,
    transfers: int,
    chunk_mb: int,
    upload_concurrency: int | None = None,
    multi_thread_streams: int | None = None,
) -> list[str]:
    # Multipart from one chunk up, so the chunk size matters for lab-sized files too. A
    # multi-thread download sets its own GET size; S3's part size must still be >= 5 MiB.
    part_mb = max(chunk_mb, 5) if multi_thread_streams else chunk_mb
    argv = [
        binary,
        "copy",
        src,
        dst,
        "--transfers",
        str(transfers),
        "--s3-chunk-size",
        f"{part_mb}M",
        "--s3-upload-cutoff",
        f"{part_mb}M",
        "--use-json-log",
        "-v",
        "--retries",
        "1",
        "--low-level-retries",
        "3",
    ]
    if upload_concurrency:  # 1 = a file's parts one after another, as Google Drive takes them
        argv += ["--s3-upload-concurrency", str(upload_concurrency)]
    if multi_thread_streams:  # a download in ranged GETs of one chunk each, like `aws s3 cp`
        argv += ["--multi-thread-cutoff", f"{chunk_mb}M", "--multi-thread-streams", str(multi_thread_streams)]
        argv += ["--multi-thread-chunk-size", f"{chunk_mb}M"]
    return argv


def run_rclone(
    host: Node,
    env: Mapping[str, str],
    binary: str,
    src: str,
    dst: str,
    transfers: int,
    chunk_mb: int,
    upload_concurrency: int | None = None,
    timeout: float = 600,
    multi_thread_streams: int | None = None,
) -> Measurement:
    argv = rclone_argv(binary, src, dst, transfers, chunk_mb, upload_concurrency, multi_thread_streams)
    started = time.monotonic()
    _, err, code = _run(host, argv, timeout=timeout, env={**env, "RCLONE_CONFIG": "/dev/null"})
    wall = time.monotonic() - started
    try:
        stats = parse_rclone_jsonlog(err)
    except MeasureError as exc:
        return Measurement("rclone", 0, wall, 0.0, False, str(exc))
    ok = code == 0 and stats.errors == 0
    reason = None if ok else (stats.last_error or "; ".join(rclone_messages(err)[-2:]) or f"rclone exit code {code}")
    return Measurement(
        "rclone",
        stats.bytes,
        wall,
        mbps(stats.bytes, wall),
        ok,
        reason,
        extra={"files": stats.transfers, "rclone_elapsed_s": stats.elapsed_s},
    )


def _run(host: Node, argv: list[str], timeout: float, env: Mapping[str, str] | None = None) -> tuple[str, str, int]:
    from .services import clean_env

    proc = host.popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env) if env is not None else clean_env()
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return out.decode(errors="replace"), f"timed out after {timeout:.0f}s", -9
    return out.decode(errors="replace"), err.decode(errors="replace"), proc.returncode


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
