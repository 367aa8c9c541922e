"""A takeover's role requests (``controller/openflow/roles.py``): one round trip for all switches,
not one per switch in turn. Issue 44: on a loaded machine each switch's answer took tens of
milliseconds, and four in sequence were a fail-over's tail."""

from __future__ import annotations

import threading
import time
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.openflow.roles import RoleController
from viplanes.controller.runtime.lane_runtime import LaneRuntime

ANSWER_S = 0.25  # each switch's answer to a role request + barrier


def slow_switches(ctl: RoleController, dpids: list[int], stale: set[int] | None = None) -> list[int]:
    """Switches that answer every barrier ``ANSWER_S`` after it was sent; returns the role
    requests' dpids in the order they were sent."""
    order: list[int] = []

    def answer(dpid: int, msgs: list[Any]) -> None:
        time.sleep(ANSWER_S)
        for msg in msgs:
            if isinstance(msg, parser.OFPRoleRequest) and dpid in (stale or set()):
                ctl.on_error(dpid, msg.xid, ofp.OFPET_ROLE_REQUEST_FAILED, ofp.OFPRRFC_STALE)
            elif isinstance(msg, parser.OFPBarrierRequest):
                ctl.on_barrier_reply(dpid, msg.xid)

    def send(dpid: int, msgs: list[Any]) -> bool:
        order.append(dpid)
        threading.Thread(target=answer, args=(dpid, msgs), daemon=True).start()
        return True

    ctl.runtime.send = send
    ctl.runtime.connected.update(dpids)
    return order


def controller() -> RoleController:
    ctl = RoleController(LaneRuntime(None))
    ctl.runtime.spawn = lambda fn: None  # roles only, no reconcile
    return ctl


def test_a_takeover_asks_every_switch_at_once() -> None:
    ctl = controller()
    order = slow_switches(ctl, [1, 2, 3, 4])
    t0 = time.monotonic()
    ctl.set_role(True, 5)
    took = time.monotonic() - t0
    assert ctl.is_master and sorted(order) == [1, 2, 3, 4]
    assert took < 2 * ANSWER_S, f"role requests took {took:.2f} s for 4 switches answering in {ANSWER_S} s each"


def test_a_stale_generation_on_one_switch_of_many_still_steps_down() -> None:
    ctl = controller()
    deposed: list[int] = []
    ctl.on_deposed = deposed.append
    slow_switches(ctl, [1, 2, 3], stale={2})
    ctl.set_role(True, 4)
    assert not ctl.is_master and deposed == [4]


def test_a_switch_that_never_answers_costs_one_wait_not_one_per_switch(monkeypatch) -> None:
    from viplanes.controller.openflow import roles

    monkeypatch.setattr(roles, "ROLE_WAIT_S", 0.3)
    ctl = controller()
    ctl.runtime.send = lambda dpid, msgs: True  # nothing ever answers
    ctl.runtime.connected.update([1, 2, 3])
    t0 = time.monotonic()
    ctl.set_role(False, 2)
    assert time.monotonic() - t0 < 0.6
