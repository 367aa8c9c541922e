"""The os-ken app: binds what the runtime decides to live switches. It holds no flow logic.

Events in -> calls of one ``SwitchEvents`` (``events.py``: the ``LaneRuntime``, or a cluster
node's ``RoleController``); its ``bind`` gets ``send_ofmsgs`` here (bind each message to the
switch's live ``Datapath`` and queue it). The only packets it handles itself are punted ARP
requests, answered with the frame ``proxyarp`` builds; punted cabling probes go to ``probe_in``.

Only connections the listener admitted reach ``_switch_features`` (their certificate is
authorized for the dpid, and no live connection holds it: ``admission.py``).

Started without a runtime (``python -m viplanes.controller.openflow.launcher``) it makes its own without a
topology: every switch gets table-miss -> NORMAL and nothing else.
"""

from __future__ import annotations

import logging
from typing import Any

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3

from viplanes.controller.openflow.events import SwitchEvents
from viplanes.controller.openflow.server import GuardedDatapath
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.controller.runtime.links import port_is_up as _port_is_up

LOG = logging.getLogger("viplanes.controller")


class VipLanesApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args: Any, switch_events: SwitchEvents | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.datapaths: dict[int, Any] = {}  # dpid -> live connection
        self.switch_events: SwitchEvents = switch_events if switch_events is not None else LaneRuntime(None)
        self.switch_events.bind(self.send_ofmsgs, self.send_many)
        # flow stats decoded on the connection's thread reach ``switch_events.on_flow_stats`` through
        # the listener (``handler.py``), not through this app

    def send_ofmsgs(self, dpid: int, ofmsgs: list[Any]) -> bool:
        """Bind and queue messages built with datapath=None; False when the switch is gone.

        Our own connections (``server.GuardedDatapath``) take the batch as one buffer; another
        ``Datapath`` (os-ken's own listener, a test's) message by message."""
        dp = self.datapaths.get(dpid)
        if dp is None:
            return False
        if isinstance(dp, GuardedDatapath):
            return dp.send_msgs(ofmsgs)
        for msg in ofmsgs:
            msg.datapath = dp
            if not dp.send_msg(msg):
                return False
        return True

    def send_many(self, batches: list[tuple[int, list[Any]]]) -> list[bool]:
        """One change's batches for several switches: every batch serialised first, then all
        written back to back. Serialising switch 2 after writing switch 1 let a reader thread
        take the GIL at each write (the write releases it), which spread an activation's three
        writes over ~1.2 ms; now they leave within a few tens of microseconds (issue 13)."""
        staged: list[tuple[Any, bytes | None]] = []
        for dpid, ofmsgs in batches:
            dp = self.datapaths.get(dpid)
            staged.append((dp, dp.serialize_batch(ofmsgs) if isinstance(dp, GuardedDatapath) else None))
        sent = []
        for (dpid, ofmsgs), (dp, data) in zip(batches, staged, strict=True):
            if dp is None:
                sent.append(False)
            elif data is None:  # not one of our connections (tests): message by message
                sent.append(self.send_ofmsgs(dpid, ofmsgs))
            else:
                sent.append(bool(dp.write_batch(data)))
        return sent

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _switch_features(self, ev: Any) -> None:
        # The dpid comes from the message: ``dp.id`` is set by os-ken's handshake app, whose
        # event thread may not have run yet. Reading it here registered a switch under None
        # (2 of 158 integration tests in one CI run): connected, never sendable, never ready.
        dp, dpid = ev.msg.datapath, ev.msg.datapath_id
        if dp.id is None:
            dp.id = dpid  # the same value os-ken sets; this app's later events need it now
        old = self.datapaths.get(dpid)
        self.datapaths[dpid] = dp
        LOG.info("switch connected dpid=%d", dpid)
        if old is not None and old is not dp:
            # the listener's admission (ofserver/admission.py) let this connection in only after
            # the older one failed an echo probe and was shut down; forget the older one here
            LOG.warning(
                "dpid=%d connected again from %s; the older connection from %s is closed", dpid, dp.address, old.address
            )
            if isinstance(old, GuardedDatapath):
                old.shutdown()  # from this thread: its reader returns and the connection closes
            else:
                old.close()
            self.switch_events.switch_down(dpid)
        self.switch_events.switch_up(dpid)

    @set_ev_cls(ofp_event.EventOFPStateChange, [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def _state_change(self, ev: Any) -> None:
        dp = ev.datapath
        dpid = dp.id
        if ev.state == DEAD_DISPATCHER and dpid is not None and self.datapaths.get(dpid) is dp:
            del self.datapaths[dpid]
            LOG.info("switch disconnected dpid=%d", dpid)
            self.switch_events.switch_down(dpid)

    # replies to what the runtime sent at connect time may come before os-ken moves to MAIN
    @set_ev_cls(ofp_event.EventOFPBarrierReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _barrier_reply(self, ev: Any) -> None:
        self.switch_events.on_barrier_reply(ev.msg.datapath.id, ev.msg.xid)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev: Any) -> None:
        msg = ev.msg
        if msg.datapath.id is not None:
            self.switch_events.on_error(msg.datapath.id, msg.xid, msg.type, msg.code)

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _flow_stats(self, ev: Any) -> None:
        msg = ev.msg
        more = bool(msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE)
        self.switch_events.on_flow_stats(msg.datapath.id, msg.xid, list(msg.body), more)

    @set_ev_cls(ofp_event.EventOFPAggregateStatsReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _aggregate_stats(self, ev: Any) -> None:
        msg = ev.msg  # one body: the drift probe's flow count (``drift.py``)
        self.switch_events.on_flow_stats(msg.datapath.id, msg.xid, [msg.body], False)

    @set_ev_cls(ofp_event.EventOFPTableFeaturesStatsReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _table_features(self, ev: Any) -> None:
        msg = ev.msg  # asked at connect (``runtime/switchfacts.py``); OVS answers in several parts
        more = bool(msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE)
        self.switch_events.on_flow_stats(msg.datapath.id, msg.xid, list(msg.body), more)

    @set_ev_cls(ofp_event.EventOFPMeterFeaturesStatsReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _meter_features(self, ev: Any) -> None:
        msg = ev.msg
        self.switch_events.on_flow_stats(msg.datapath.id, msg.xid, list(msg.body), False)

    @set_ev_cls(ofp_event.EventOFPFlowRemoved, MAIN_DISPATCHER)
    def _flow_removed(self, ev: Any) -> None:
        msg = ev.msg
        self.switch_events.on_flow_removed(msg.datapath.id, msg.cookie, msg.reason)

    @set_ev_cls(ofp_event.EventOFPPortDescStatsReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _port_desc(self, ev: Any) -> None:
        msg = ev.msg  # asked at connect (``LaneRuntime.read_ports``); os-ken's own ask is ignored
        more = bool(msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE)
        self.switch_events.on_flow_stats(msg.datapath.id, msg.xid, list(msg.body), more)

    @set_ev_cls(ofp_event.EventOFPGroupDescStatsReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _group_desc(self, ev: Any) -> None:
        msg = ev.msg  # asked by reconcile (``Wire.group_descs``): the lanes' fast-failover groups
        more = bool(msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE)
        self.switch_events.on_flow_stats(msg.datapath.id, msg.xid, list(msg.body), more)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _packet_in(self, ev: Any) -> None:
        msg = ev.msg
        dp = msg.datapath
        data = bytes(msg.data or b"")
        in_port = msg.match.get("in_port")
        if in_port is not None and dp.id is not None and self.switch_events.probe_in(dp.id, in_port, data):
            return  # a cabling probe (``runtime/prober.py``)
        reply = self.switch_events.arp_reply(data)
        if reply is None or in_port is None:
            return
        parser, ofp = dp.ofproto_parser, dp.ofproto
        dp.send_msg(
            parser.OFPPacketOut(
                dp,
                buffer_id=ofp.OFP_NO_BUFFER,
                in_port=ofp.OFPP_CONTROLLER,
                actions=[parser.OFPActionOutput(in_port)],
                data=reply,
            )
        )

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _port_status(self, ev: Any) -> None:
        msg = ev.msg
        desc = msg.desc
        dpid = msg.datapath.id
        LOG.info(
            "dpid=%d port %s %s (state %#x, config %#x)",
            dpid,
            desc.port_no,
            {0: "added", 1: "deleted", 2: "modified"}.get(msg.reason, msg.reason),
            desc.state,
            desc.config,
        )
        if dpid is not None:
            self.switch_events.port_status(dpid, desc.port_no, port_is_up(msg.reason, desc.state, desc.config))


def port_is_up(reason: int, state: int, config: int) -> bool:
    """A port carries lanes unless deleted, its link is down, or it is administratively down."""
    return _port_is_up(reason == ofproto_v1_3.OFPPR_DELETE, state, config)
