"""How long a lab run takes, roughly (for lane lengths, the progress bar and `--dry-run`), and
the WAN model a run went through, as its record keeps it.

`experiments.py` re-exports both for the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from viplanes.topologies.model import Wan

from .filetools import FILE_TOOLS, MULTI_TOOLS

if TYPE_CHECKING:
    from .sweep import RunSpec

# The DTN sits in the science DMZ: its default path is already middlebox-free (the reference).
NO_LANE = ("dtn",)


def estimate_s(
    spec: RunSpec,
    size_mb: int,
    default_mbps: float = 14.0,
    lane_mbps: float = 90.0,
    wan_mbps: float | None = None,
    wan: Wan | None = None,
) -> float:
    """A rough duration of one run, for lane lengths and the progress bar.

    With a `wan` (the topology's WAN model) an rclone run also pays its requests: a round trip
    and the storage's service time for each file (and each part of a multipart file)."""
    if spec.tool == "iperf3":
        return (spec.seconds or 0) + 1.5 + (4 * wan.rtt_ms / 1000 if wan else 0.0)
    rate = lane_mbps if spec.path == "lane" or spec.placement in NO_LANE else default_mbps
    if spec.tool in FILE_TOOLS:  # one file, one connection (aria2: parallel)
        conns = spec.parallel if spec.tool in MULTI_TOOLS else 1
        service = "http" if spec.tool in ("wget", "aria2") else "ssh"
        cap = (wan.down_for(service) if wan is not None else wan_mbps) or rate
        if wan is not None and (e := wan.endpoint(service)) is not None and e.total_mbps is not None:
            rate = min(rate, e.total_mbps)  # the endpoint's NIC, whatever the connections
        trips = 15 if spec.tool in ("scp", "rsync") else 1  # ssh's handshake: 5.5 s at 300 ms, measured
        return size_mb * 8.4 / min(rate, conns * cap) + 1.0 + trips * (wan.rtt_ms / 1000 if wan else 0.0)
    if wan is not None:
        wan_mbps = wan.up if spec.direction == "upload" else wan.down
    # one file: one connection, but a download goes in ranged GETs on `parallel` (multi-thread)
    conns = spec.parallel if spec.dataset != "one" or spec.direction == "download" else 1
    if wan_mbps:  # one connection per file (or per single multipart file)
        rate = min(rate, conns * wan_mbps)
    extra = 0.0
    if wan is not None:
        files = int((spec.dataset or "").removeprefix("split") or 1) if spec.dataset != "one" else 1
        parts = max(1, -(-size_mb // (spec.chunk_mb or size_mb))) + 2 if spec.dataset == "one" else 1
        storage_ms = wan.read_ms if spec.direction == "download" else wan.request_ms
        extra = files * parts / conns * (wan.rtt_ms + storage_ms) / 1000 + 2.0  # + rclone's start
        if spec.direction == "upload" and wan.write_rps > 0:  # the account's write quota
            return max(size_mb * 8.4 / rate + 1.5 + extra, files * parts / wan.write_rps + 3.5)
    return size_mb * 8.4 / rate + 1.5 + extra


def wan_record(wan: Wan | None) -> dict[str, float] | None:
    """The WAN model a run went through, kept in its record so a report can say what it measured."""
    if wan is None:
        return None
    return {
        "up_mbps": wan.up,
        "down_mbps": wan.down,
        "rtt_ms": wan.rtt_ms,
        "request_ms": wan.request_ms,
        "read_request_ms": wan.read_ms,
        "write_rps": wan.write_rps,
        "storage_workers": wan.storage_workers,
        **{
            f"endpoint_{e.name}_{key}": value
            for e in wan.endpoints
            for key, value in (("up_mbps", e.up_mbps), ("down_mbps", e.down_mbps), ("total_mbps", e.total_mbps))
            if value is not None
        },
    }
