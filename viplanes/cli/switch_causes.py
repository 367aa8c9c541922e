"""Why a switch of the topology is not connected, from the controller's recent refusals.

Why: doctor used to blame TLS for every switch not connected. The common causes differ and so do
their fixes: a bridge whose datapath id was never set connects under another dpid (refused as
unknown); a certificate that does not name the dpid; a TLS handshake the switch or we refused;
a plain-TCP (--insecure-tcp) service, where nothing about TLS applies; or no attempt at all.
Pure: the readiness report's ``refused`` list (controller/runtime/refusals.py) in, text out.
"""

from __future__ import annotations

from typing import Any

GUIDE = "docs/switches.md"


def _dpids(items: list[dict[str, Any]]) -> str:
    return ", ".join(f"{d} ({d:#018x})" for d in sorted({int(r["dpid"]) for r in items if r.get("dpid") is not None}))


def not_connected(name: str, dpid: int, refused: list[dict[str, Any]], insecure_tcp: bool) -> tuple[str, str]:
    """(detail, fix) for switch ``name`` (``dpid``) that is not connected."""
    want = f"other-config:datapath-id={dpid:016x}"
    mine = [r for r in refused if r.get("dpid") == dpid]
    if mine:
        reason = str(mine[-1].get("reason", ""))
        return (
            f"dpid {dpid} connected and was refused: {reason}",
            f"issue its certificate for this dpid (viplanes pki switch --name {name} --dpid {dpid:#x}) "
            "or fix the pin in the topology",
        )
    unknown = [r for r in refused if r.get("kind") == "unknown_dpid"]
    if unknown:
        return (
            f"dpid {dpid} not connected; a bridge connected as dpid {_dpids(unknown)}, which is not in the topology",
            f"set the bridge's datapath id: ovs-vsctl set bridge BRIDGE {want} ({GUIDE})",
        )
    tls = [r for r in refused if r.get("kind") in ("tls", "denied")]
    if tls:
        # a TLS refusal carries no dpid: it may be this bridge's, or another peer's
        return (
            f"dpid {dpid} not connected; a connection was refused lately: {tls[-1].get('reason', '')}",
            f"if that was this bridge, the refusal names the fix; else point it at the controller: ovs-vsctl "
            f"set-controller BRIDGE ssl:HOST:PORT, and {want} ({GUIDE})",
        )
    if insecure_tcp:
        return (
            f"dpid {dpid} not connected, no connection refused (the service runs --insecure-tcp: no TLS involved)",
            f"point the bridge at the controller: ovs-vsctl set-controller BRIDGE tcp:HOST:PORT, and {want}",
        )
    return (
        f"dpid {dpid} not connected, no connection refused: the bridge does not reach the controller",
        f"ovs-vsctl set-controller BRIDGE ssl:HOST:PORT with set-ssl, and {want} ({GUIDE})",
    )
