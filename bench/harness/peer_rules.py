"""One lane's rules in the peers' own terms: ofctl_rest JSON bodies and a Faucet config.

The peers get the same number of flows per switch as our compiler emits for the lane (s1: 2,
s2: 2, s3: 4 for the desktop lane), with the same matches and SET_FIELD/OUTPUT actions. Neither
peer speaks conntrack through its interface (ofctl_rest has no NX_CT action or ct_state match,
Faucet no conntrack), so a rule that uses conntrack keeps its other match fields and forwards
plainly; if dropping ``ct_*`` leaves two rules identical, the second goes to the next table so
the count stays the same. Pure: tested without OVS.
"""

from __future__ import annotations

from typing import Any

import yaml

FlowBody = dict[str, Any]

OFPTT_ALL = 255
ALL_ONES_64 = (1 << 64) - 1


def _match_dict(match: Any) -> dict[str, Any]:
    return {k: v for k, v in match.items() if not k.startswith("ct_")}


def _plain_actions(msg: Any, in_port: int | None) -> list[dict[str, Any]]:
    """SET_FIELD and OUTPUT as ofctl_rest spells them; anything else (conntrack) -> one OUTPUT."""
    actions: list[dict[str, Any]] = []
    other = False
    for inst in msg.instructions:
        for act in getattr(inst, "actions", []):
            name = type(act).__name__
            if name == "OFPActionOutput":
                actions.append({"type": "OUTPUT", "port": act.port})
            elif name == "OFPActionSetField":
                actions.append({"type": "SET_FIELD", "field": act.key, "value": act.value})
            else:
                other = True
    if other and not any(a["type"] == "OUTPUT" for a in actions):
        actions.append({"type": "OUTPUT", "port": 3 if in_port == 2 else 2})
    return actions


def ofctl_rest_bodies(lane_msgs: dict[int, list[Any]], cookie: int) -> dict[int, list[FlowBody]]:
    """dpid -> POST /stats/flowentry/add bodies for one lane's compiled flow mods."""
    out: dict[int, list[FlowBody]] = {}
    for dpid, msgs in lane_msgs.items():
        seen: set[tuple[int, int, str]] = set()
        bodies = []
        for msg in msgs:
            if type(msg).__name__ != "OFPFlowMod":  # meters: the peers compared carry none
                continue
            match = _match_dict(msg.match)
            table = msg.table_id
            while (table, msg.priority, repr(sorted(match.items()))) in seen:
                table += 1
            seen.add((table, msg.priority, repr(sorted(match.items()))))
            bodies.append(
                {
                    "dpid": dpid,
                    "cookie": cookie,
                    "table_id": table,
                    "priority": msg.priority,
                    "hard_timeout": msg.hard_timeout,
                    "idle_timeout": msg.idle_timeout,
                    "flags": msg.flags,
                    "match": match,
                    "actions": _plain_actions(msg, match.get("in_port")),
                }
            )
        out[dpid] = bodies
    return out


def ofctl_rest_delete_bodies(dpids: list[int], cookie: int) -> list[FlowBody]:
    """POST /stats/flowentry/delete bodies: every table, exactly this cookie, one per switch."""
    return [{"dpid": d, "table_id": OFPTT_ALL, "cookie": cookie, "cookie_mask": ALL_ONES_64} for d in dpids]


_FAUCET_FIELDS = ("eth_src", "eth_type", "ip_proto", "ipv4_src", "ipv4_dst", "tcp_src", "tcp_dst", "udp_src", "udp_dst")


def faucet_acls(
    lane_msgs: dict[int, list[Any]], tag: str, lane_port: int
) -> dict[tuple[int, int], tuple[str, list[dict]]]:
    """(dpid, in_port) -> (acl name, rules): one Faucet port ACL per ingress port of the lane.

    Every rule names the lane's TCP port (a conntrack rule that named none gets it as
    ``tcp_src``, the reply direction), so the flow monitor can tell this lane's flows apart."""
    out: dict[tuple[int, int], tuple[str, list[dict]]] = {}
    for dpid, msgs in lane_msgs.items():
        for msg in msgs:
            if type(msg).__name__ != "OFPFlowMod":  # meters: the peers compared carry none
                continue
            match = _match_dict(msg.match)
            port = int(match.get("in_port", 1))
            rule = {k: match[k] for k in _FAUCET_FIELDS if k in match}
            rule.setdefault("eth_type", 0x0800)
            if "tcp_src" not in rule and "tcp_dst" not in rule:
                rule.update(ip_proto=6, tcp_src=lane_port)
            rule["actions"] = {"allow": 1}
            name, rules = out.setdefault((dpid, port), (f"{tag}_{dpid}_{port}", []))
            if {"rule": rule} in rules:  # same rule twice once conntrack is gone: keep the count
                rule = {**rule, "ip_dscp": len(rules)}
            rules.append({"rule": rule})
    return out


IDLE_ACL = "bench_idle"


def faucet_config(
    ports: dict[int, set[int]], acls: dict[tuple[int, int], tuple[str, list[dict]]], vid: int = 100
) -> str:
    """A Faucet YAML config: one dp per switch (dp_id = dpid), every used port on one VLAN,
    and the lane's ACLs (if any) first on their ingress ports.

    Every port always carries a one-rule ACL: Faucet builds a dp's port-ACL table only while some
    port of that dp has an ACL, and the lane's first ACL would otherwise cold-start the switch."""
    named = {IDLE_ACL: [{"rule": {"eth_type": 0x0806, "actions": {"allow": 1}}}]}
    named.update({name: rules for name, rules in acls.values()})
    dps: dict[str, Any] = {}
    for dpid, used in sorted(ports.items()):
        interfaces: dict[int, Any] = {}
        for port in sorted(used):
            lane_acl = [acls[(dpid, port)][0]] if (dpid, port) in acls else []
            interfaces[port] = {"native_vlan": "bench", "acls_in": [*lane_acl, IDLE_ACL]}
        dps[f"sw{dpid}"] = {"dp_id": dpid, "hardware": "Open vSwitch", "interfaces": interfaces}
    config: dict[str, Any] = {"vlans": {"bench": {"vid": vid}}, "acls": named, "dps": dps}
    return yaml.safe_dump(config, sort_keys=True)
