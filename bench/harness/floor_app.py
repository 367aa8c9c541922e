"""The floor: a minimal os-ken app that sends compiled lane messages and waits for barriers.

No database, no policy, no HTTP, no bookkeeping: just bind the compiler's messages to the live
datapaths, send them, one barrier per switch, all switches in parallel, and wait until every
barrier is answered. Whatever the real controller adds on top of this is overhead to explain.
"""

from __future__ import annotations

import threading
from typing import Any

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3


class FloorApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.datapaths: dict[int, Any] = {}
        self.errors: list[str] = []
        self._cond = threading.Condition()
        self._pending: dict[tuple[int, int], threading.Event] = {}
        self.base_flows: dict[int, list[Any]] = {}  # dpid -> messages to send on connect
        self.batched = False  # True: one socket write (one send-queue put) per switch
        self.bundle = False  # True: wrap each switch's messages in an atomic ONF bundle (OF1.3 ext.)
        self._bundle_ids = iter(range(1, 1 << 31))

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _features(self, ev: Any) -> None:
        dp = ev.msg.datapath
        for msg in self.base_flows.get(dp.id, []):
            msg.datapath = dp
            dp.send_msg(msg)
        with self._cond:
            self.datapaths[dp.id] = dp
            self._cond.notify_all()

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier_reply(self, ev: Any) -> None:
        event = self._pending.pop((ev.msg.datapath.id, ev.msg.xid), None)
        if event is not None:
            event.set()

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev: Any) -> None:
        msg = ev.msg
        self.errors.append(f"dpid={msg.datapath.id} type={msg.type} code={msg.code}")

    def wait_for(self, dpids: set[int], timeout_s: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: dpids <= set(self.datapaths), timeout_s)

    def send_with_barriers(self, ofmsgs_by_dpid: dict[int, list[Any]], timeout_s: float = 5.0) -> bool:
        """Send each switch its messages plus one barrier; True when every barrier answered."""
        waits = []
        for dpid, ofmsgs in ofmsgs_by_dpid.items():
            dp = self.datapaths[dpid]
            barrier = dp.ofproto_parser.OFPBarrierRequest(dp)
            event = threading.Event()
            if self.bundle:  # open, add each message, commit; the barrier confirms the commit
                # (the bundle replies are experimenter messages the guarded listener drops)
                ofmsgs = self._bundled(dp, ofmsgs)
            if self.batched:  # os-ken queues each send_msg separately: every put wakes a thread
                chunks = []
                for msg in [*ofmsgs, barrier]:
                    msg.datapath = dp
                    dp.set_xid(msg)
                    msg.serialize()
                    chunks.append(bytes(msg.buf))
                self._pending[(dpid, barrier.xid)] = event
                dp.send(b"".join(chunks))
            else:
                for msg in ofmsgs:
                    msg.datapath = dp
                    dp.send_msg(msg)
                dp.set_xid(barrier)
                self._pending[(dpid, barrier.xid)] = event
                dp.send_msg(barrier)
            waits.append(event)
        return all(event.wait(timeout_s) for event in waits)

    def _bundled(self, dp: Any, ofmsgs: list[Any]) -> list[Any]:
        ofp, parser = dp.ofproto, dp.ofproto_parser
        bid = next(self._bundle_ids)
        flags = ofp.ONF_BF_ATOMIC | ofp.ONF_BF_ORDERED
        out = [parser.ONFBundleCtrlMsg(dp, bid, ofp.ONF_BCT_OPEN_REQUEST, flags, [])]
        for msg in ofmsgs:
            msg.datapath = dp
            out.append(parser.ONFBundleAddMsg(dp, bid, flags, msg, []))
        out.append(parser.ONFBundleCtrlMsg(dp, bid, ofp.ONF_BCT_COMMIT_REQUEST, flags, []))
        return out
