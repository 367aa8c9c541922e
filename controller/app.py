"""The os-ken app: binds pure decisions to live switches. It holds no flow logic of its own.

First version: keeps the switch registry and installs the campus's default forwarding
(table-miss -> NORMAL) so the default path through firewall and NAT works.
"""
from __future__ import annotations

import logging

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3

LOG = logging.getLogger("viplanes.controller")


class VipLanesApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.datapaths: dict[int, object] = {}

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _switch_features(self, ev) -> None:
        dp = ev.msg.datapath
        parser, ofp = dp.ofproto_parser, dp.ofproto
        dp.send_msg(parser.OFPFlowMod(
            datapath=dp, priority=0, match=parser.OFPMatch(),
            instructions=[parser.OFPInstructionActions(
                ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(ofp.OFPP_NORMAL)])]))
        self.datapaths[dp.id] = dp
        LOG.info("switch connected dpid=%d", dp.id)

    @set_ev_cls(ofp_event.EventOFPStateChange, [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def _state_change(self, ev) -> None:
        dp = ev.datapath
        if ev.state == DEAD_DISPATCHER and dp.id is not None and self.datapaths.get(dp.id) is dp:
            del self.datapaths[dp.id]
            LOG.info("switch disconnected dpid=%d", dp.id)
