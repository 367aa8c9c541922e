"""HOST:PORT values, parsed one way for every CLI (serve's --api/--openflow, controller --listen)."""

from __future__ import annotations

import ipaddress

LOOPBACK = "127.0.0.1"


def parse_hostport(value: str, default_port: int | None = None) -> tuple[str, int]:
    """'HOST:PORT' -> (host, port); ValueError with a readable message.

    With ``default_port``, 'HOST' and ':PORT' are accepted too (the missing part defaults to
    that port or to loopback); without it both parts are required, so an address that is
    exposed to others is never guessed.
    """
    host, sep, port_text = value.rpartition(":")
    if not sep:
        if default_port is None:
            raise ValueError(f"expected HOST:PORT, got {value!r}")
        host, port_text = value, str(default_port)
    host = host.strip("[]")
    if not host:
        if default_port is None:
            raise ValueError(f"expected HOST:PORT, got {value!r}")
        host = LOOPBACK
    if not (port_text.isascii() and port_text.isdigit()):
        raise ValueError(f"port must be a number in {value!r}")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ValueError(f"port {port} out of range 1-65535 in {value!r}")
    return host, port


def is_address(text: str) -> bool:
    """An IPv4 or IPv6 literal (as opposed to a host name)."""
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False
