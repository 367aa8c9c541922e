"""A server of its own beyond the provider (``wan.endpoints`` in a campus file; seed 003's VM),
as the WAN proxy takes it on its command line: ``--endpoint PORTS=KEY:MBPS,...``.

``PORTS`` are the proxy's listen ports of the endpoint's services (comma-separated); the keys
are ``up`` and ``down`` (per connection, instead of the proxy's ``--up-mbps``/``--down-mbps``)
and ``total`` (every connection to those ports together, each way: the server's NIC). Pure:
the proxy builds its buckets from the parsed value; the lab builds the text from the topology.
"""

from __future__ import annotations

from dataclasses import dataclass

KEYS = ("up", "down", "total")


@dataclass(frozen=True)
class EndpointShape:
    ports: tuple[int, ...]
    up_mbps: float | None = None
    down_mbps: float | None = None
    total_mbps: float | None = None

    def text(self) -> str:
        """The ``--endpoint`` value that parses back to this shape."""
        caps = zip(KEYS, (self.up_mbps, self.down_mbps, self.total_mbps), strict=True)
        parts = [f"{k}:{v:g}" for k, v in caps if v is not None]
        return ",".join(str(p) for p in self.ports) + "=" + ",".join(parts)


def parse_endpoint(text: str) -> EndpointShape:
    """``22,80=down:7.5,total:9.5`` -> the shape; ValueError with one readable line."""
    bad = f"--endpoint {text!r}: expected PORT[,PORT...]=KEY:MBPS[,...] with keys {', '.join(KEYS)}"
    ports_text, sep, caps_text = text.partition("=")
    if not sep or not caps_text:
        raise ValueError(bad)
    try:
        ports = tuple(int(p) for p in ports_text.split(","))
        pairs = [c.split(":") for c in caps_text.split(",")]
        caps = {k: float(v) for k, v in pairs}
    except ValueError:
        raise ValueError(bad) from None
    if not all(0 < p < 65536 for p in ports) or len(set(ports)) != len(ports):
        raise ValueError(f"--endpoint {text!r}: ports must be distinct, 1..65535")
    unknown = sorted(set(caps) - set(KEYS))
    if unknown or len(caps) != len(pairs):
        raise ValueError(f"--endpoint {text!r}: unknown or repeated key {', '.join(unknown) or '(repeated)'}")
    if not all(v > 0 and v == v and v != float("inf") for v in caps.values()):
        raise ValueError(f"--endpoint {text!r}: every rate must be a positive number of Mbit/s")
    return EndpointShape(ports, caps.get("up"), caps.get("down"), caps.get("total"))
