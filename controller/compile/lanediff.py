"""What a re-activated lane no longer needs: strict deletes of the flows of its old spec that its
new spec does not install again (a destination a name stopped resolving to, a narrowed port
range). Pure (``datapath=None``).

The runtime sends these *after* the new spec's ADDs, in the same barrier'd batch per switch, so
an address that stays never goes without its rules (an ADD with the same match and priority
replaces the old flow in place; only flows whose match no longer exists are deleted, by
DELETE_STRICT on table + priority + match + exact cookie).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile import lane as compiler
from viplanes.controller.compile.flowkey import match_key
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology

OFMsgs = list[Any]


def _slot(msg: Any) -> Hashable:
    """Where a flow sits on a switch: an ADD to the same slot replaces it."""
    return (msg.table_id, msg.priority, msg.cookie, match_key(msg.match))


def stale_deletes(old: LaneSpec, new_flows: dict[int, OFMsgs], topo: Topology, now: float) -> dict[int, OFMsgs]:
    """Per dpid, a DELETE_STRICT for every flow of ``old`` that ``new_flows`` does not replace.
    Empty when the old spec cannot be compiled any more (expired: its hard timeout and the
    next reconcile remove what is left)."""
    try:
        old_flows = compiler.compile_lane(old, topo, now)
    except ValueError:
        return {}
    out: dict[int, OFMsgs] = {}
    for dpid, msgs in old_flows.items():
        kept = {_slot(m) for m in new_flows.get(dpid, []) if isinstance(m, parser.OFPFlowMod)}
        gone = [
            compiler.compile_flow_delete(m) for m in msgs if isinstance(m, parser.OFPFlowMod) and _slot(m) not in kept
        ]
        if gone:
            out[dpid] = gone
    return out
