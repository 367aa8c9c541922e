"""What `viplanes doctor` checks when no flag or [doctor] key says otherwise: the service's own
settings, read from the same tables `serve` (or the split deployment's `controller`) reads.

Why: doctor has options of its own (--pki, --topology, ...); with only a `[serve]` table in the
file it used to warn "no --pki given" and check the lab campus bundled in site-packages while
serve ran the operator's PKI and campus. Pure: the file's tables in, doctor's defaults out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SERVICE_TABLES = ("serve", "controller", "api")  # first table that sets a key wins
WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


@dataclass(frozen=True)
class ServiceView:
    """doctor's parameters (by their Python names) taken from the service tables, and where from."""

    values: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)  # parameter -> "[serve] pki"
    insecure_tcp: bool = False  # the service's OpenFlow is plain TCP: no TLS cause to blame


def _first(tables: dict[str, dict[str, Any]], key: str) -> tuple[str, Any] | None:
    for table in SERVICE_TABLES:
        value = tables.get(table, {}).get(key)
        if value not in (None, "", []):
            return table, value
    return None


def api_url_of(listen: str, tls: bool) -> str:
    """The URL a local doctor reaches a service listening on ``listen`` (HOST:PORT) at."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    host = WILDCARDS.get(host, host)
    if ":" in host:
        host = f"[{host}]"
    return f"{'https' if tls else 'http'}://{host}:{port}"


def service_view(tables: dict[str, dict[str, Any]]) -> ServiceView:
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for param, key in (
        ("pki_dir", "pki"),
        ("topology_path", "topology"),
        ("pins", "switch_cert_pin"),
        ("db_url", "db"),
    ):
        found = _first(tables, key)
        if found is not None:
            values[param] = found[1]
            origin[param] = f"[{found[0]}] {key}"
    for table, key in (("serve", "api"), ("api", "listen")):
        listen = tables.get(table, {}).get(key)
        if isinstance(listen, str) and ":" in listen:
            values["api_url"] = api_url_of(listen, bool(tables[table].get("tls_cert")))
            origin["api_url"] = f"[{table}] {key}"
            break
    insecure = any(bool(tables.get(t, {}).get("insecure_tcp")) for t in ("serve", "controller"))
    return ServiceView(values, origin, insecure)
