"""``SwitchEvents``: every call the os-ken glue makes on a switch's events, declared in one place.

The app (``app.py``) and the listener (``handler.py``) hand each decoded event to one
``SwitchEvents``; the embedded controller (``embedded.py``) runs its periodic rounds through the
same object. Two implementations: the plain ``LaneRuntime`` (one controller, role EQUAL) and the
role-aware ``roles.RoleController`` (a cluster's node: greets each switch with its role, steps
down when a switch deposes it, writes and probes only while master), which holds the runtime and
passes on what it does not change. What differs between them is read in one class each, not in
overrides up an inheritance chain.
"""

from __future__ import annotations

from typing import Any, Protocol

from viplanes.controller.runtime.switches import Send, SendMany


class SwitchEvents(Protocol):
    """What the glue calls: connect and disconnect, port status, replies and errors, punted
    packets, and the periodic rounds; ``openflow_role`` names our role for the console."""

    def bind(self, send: Send, send_many: SendMany | None) -> None:
        """The app's writers: bind messages to the switch's live connection and queue them."""

    def switch_up(self, dpid: int) -> None:
        """A switch finished its handshake (``EventOFPSwitchFeatures``)."""

    def switch_down(self, dpid: int) -> None:
        """A switch's connection ended, or a newer one replaced it."""

    def port_status(self, dpid: int, port: int, up: bool) -> None:
        """One of a switch's own ports went up or down (the app decodes the flags)."""

    def on_barrier_reply(self, dpid: int, xid: int) -> None: ...

    def on_error(self, dpid: int, xid: int, err_type: int, code: int) -> None: ...

    def on_flow_stats(self, dpid: int, xid: int, body: list[Any], more: bool) -> None:
        """Any multipart reply the runtime asked for (flows, aggregate, ports, groups, features)."""

    def on_flow_removed(self, dpid: int, cookie: int, reason: int) -> None: ...

    def probe_in(self, dpid: int, port: int, frame: bytes) -> bool:
        """A punted frame; True when it was a cabling probe (valid or not)."""

    def arp_reply(self, frame: bytes) -> bytes | None:
        """The proxy-ARP answer to a punted request for a lane address, or None."""

    def reconcile_all(self) -> None:
        """The periodic refresh round (hard timeouts of long lanes)."""

    def check_drift(self, timeout_s: float = 2.0) -> list[int]:
        """The periodic drift round: the switches whose flow count was off and got reconciled."""

    def openflow_role(self) -> str:
        """Our OpenFlow role on the switches: ``equal``, ``master`` or ``slave``."""
