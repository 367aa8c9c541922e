"""A switch's refusal in an operator's words, the raw OpenFlow name kept for lookups."""

from __future__ import annotations

from os_ken.ofproto import ofproto_v1_3 as ofp

from viplanes.controller.runtime.wire import error_reason


def test_table_full_says_whose_table():
    text = error_reason(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_TABLE_FULL, "s1")
    assert text == "OFPET_FLOW_MOD_FAILED code 1: s1's flow table is full (OFPFMFC_TABLE_FULL)"


def test_missing_hardware_features_are_named():
    assert "single-table" in error_reason(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_BAD_TABLE_ID, "s2")
    assert "s2's meter table is full" in error_reason(ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_OUT_OF_METERS, "s2")
    assert "match field" in error_reason(ofp.OFPET_BAD_MATCH, 3, "s3")


def test_other_errors_keep_their_raw_name():
    assert error_reason(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_UNKNOWN) == "OFPET_FLOW_MOD_FAILED code 0"
    assert error_reason(99, 4) == "type 99 code 4"
