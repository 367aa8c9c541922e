"""Base flows follow the border's profile: a switch without meters gets no meter at all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.paths import CAMPUS_YAML
from viplanes.controller.compile.base import PRIORITY_ARP_PROXY, compile_base
from viplanes.topologies.loader import parse_topology


def _border(**keys: Any) -> list[Any]:
    data = yaml.safe_load(Path(CAMPUS_YAML).read_text())
    data["switches"][2].update(keys)  # s3, where the edge router attaches
    return compile_base(parse_topology(data))[3]


def _meters(msgs: list[Any]) -> list[Any]:
    mods = [m for m in msgs if isinstance(m, parser.OFPMeterMod)]
    uses = [
        i for m in msgs if isinstance(m, parser.OFPFlowMod) for i in m.instructions
        if isinstance(i, parser.OFPInstructionMeter)
    ]  # fmt: skip
    return mods + uses


def test_a_meterless_border_gets_no_meter_and_drops_unanswered_pool_arp():
    """A switch without meters refuses a meter-mod and every flow that names a meter: the whole
    base batch would fail, and an unmetered punt would open the controller to an ARP flood."""
    msgs = _border(profile="single_table")
    assert _meters(msgs) == []
    punt = [m for m in msgs if isinstance(m, parser.OFPFlowMod) and m.priority == PRIORITY_ARP_PROXY]
    assert len(punt) == 1 and punt[0].instructions == []  # dropped, never sent to the controller


def test_ovs_border_keeps_its_metered_punt():
    assert len(_meters(_border())) == 2  # the meter and the punt flow that uses it
