"""Read the campus's optional ``wan:`` mapping: per-connection caps, a round trip, the storage's
queue (the lab's model of the path to a cloud; docs/lab.md).

Split from ``loader.py`` so each section of a campus file has its own reader.
"""

from __future__ import annotations

from typing import Any

from viplanes.topologies.fields import FieldReader
from viplanes.topologies.model import WAN_SERVICES, Wan, WanEndpoint

# wan: keys with a default and a range: (default, lowest, highest, unit for messages)
WAN_RANGES: dict[str, tuple[float, float, float, str]] = {
    "burst_kb": (64, 4, 16384, "KB"),
    "rtt_ms": (0, 0, 10000, "ms"),
    "window_kb": (4096, 16, 1048576, "KB"),
    "request_ms": (0, 0, 60000, "ms"),
    "storage_workers": (8, 1, 1024, "workers"),
    "write_rps": (0, 0, 10000, "writes/s"),
}


def read_wan(reader: FieldReader, item: Any) -> Wan | None:
    """The optional WAN model: per-connection caps, a round trip and the storage's queue."""
    optional: tuple[str, ...] = ("burst_kb", "rtt_ms", "up_mbps", "down_mbps", "window_kb", "request_ms")
    optional += ("storage_workers", "read_request_ms", "write_rps", "endpoints")
    m = reader.mapping(item, "wan", ("per_connection_mbps",), optional)
    if m is None or "per_connection_mbps" not in m:
        return None
    rate = reader.number(m["per_connection_mbps"], "wan.per_connection_mbps")
    values: dict[str, float] = {}
    for key, (default, lo, hi, unit) in WAN_RANGES.items():
        value = m.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
            reader.bad(f"wan.{key}", f"expected {lo:.0f}..{hi:.0f} {unit}, got {value!r}")
            return None
        if key == "storage_workers" and value != int(value):
            reader.bad(f"wan.{key}", f"expected a whole number, got {value!r}")
            return None
        values[key] = float(value)
    caps: dict[str, float | None] = {}
    for key in ("up_mbps", "down_mbps"):
        caps[key] = reader.number(m[key], f"wan.{key}") if key in m else None
        if key in m and caps[key] is None:
            return None
    read_ms = m.get("read_request_ms")
    if read_ms is not None:
        lo, hi = WAN_RANGES["request_ms"][1:3]
        if isinstance(read_ms, bool) or not isinstance(read_ms, (int, float)) or not lo <= read_ms <= hi:
            reader.bad("wan.read_request_ms", f"expected {lo:.0f}..{hi:.0f} ms, got {read_ms!r}")
            return None
    endpoints = read_endpoints(reader, m.get("endpoints"))
    if rate is None or endpoints is None:
        return None
    return Wan(
        per_connection_mbps=rate,
        burst_kb=values["burst_kb"],
        rtt_ms=values["rtt_ms"],
        up_mbps=caps["up_mbps"],
        down_mbps=caps["down_mbps"],
        window_kb=values["window_kb"],
        request_ms=values["request_ms"],
        storage_workers=int(values["storage_workers"]),
        read_request_ms=None if read_ms is None else float(read_ms),
        write_rps=values["write_rps"],
        endpoints=endpoints,
    )


def read_endpoints(reader: FieldReader, value: Any) -> tuple[WanEndpoint, ...] | None:
    """``wan.endpoints``: servers of their own; None after a problem (each is reported)."""
    out: list[WanEndpoint] = []
    owner: dict[str, str] = {}
    ok = True
    for i, item in enumerate(reader.listing(value, "wan.endpoints")):
        where = f"wan.endpoints[{i}]"
        m = reader.mapping(item, where, ("name", "services"), ("up_mbps", "down_mbps", "total_mbps"))
        if m is None or "name" not in m or "services" not in m:
            ok = False
            continue
        name = reader.text(m["name"], f"{where}.name")
        services = reader.listing(m["services"], f"{where}.services")
        if not services:
            reader.bad(f"{where}.services", f"expected a list of one or more of {', '.join(WAN_SERVICES)}")
            ok = False
        for service in services:
            if reader.choice(service, f"{where}.services", WAN_SERVICES) is None:
                ok = False
            elif service in owner:
                reader.bad(f"{where}.services", f"{service!r} is already in endpoint {owner[service]!r}")
                ok = False
            else:
                owner[service] = str(name)
        caps = {
            k: reader.number(m[k], f"{where}.{k}") if k in m else None for k in ("up_mbps", "down_mbps", "total_mbps")
        }
        if name is None or any(k in m and caps[k] is None for k in caps):
            ok = False
            continue
        out.append(WanEndpoint(name, tuple(services), caps["up_mbps"], caps["down_mbps"], caps["total_mbps"]))
    return tuple(out) if ok else None
