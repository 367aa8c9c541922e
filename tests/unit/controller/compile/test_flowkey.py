def test_kept_canonical_values_equal_fresh_ones_and_a_full_table_starts_over(monkeypatch):
    from viplanes.controller.compile import flowkey

    monkeypatch.setattr(flowkey, "_CANONICAL_MAX", 3)
    monkeypatch.setattr(flowkey, "_canonical", {})
    items = [
        ("ipv4_dst", "203.0.113.10"),
        ("eth_dst", "AA:BB:CC:00:11:22"),
        ("tcp_dst", 5201),
        ("ipv4_src", ("10.1.0.0", "255.255.255.0")),
        ("arp_tpa", ("10.1.0.7", "255.255.255.255")),
    ]
    fresh = tuple(sorted((f, flowkey._field_value(f, v)) for f, v in items))
    assert flowkey.match_key(items) == fresh and flowkey.match_key(items) == fresh  # second: kept
    assert len(flowkey._canonical) <= 3
    before = dict(flowkey._canonical)
    assert flowkey.match_key([("metadata", bytearray(b"x"))]) == (("metadata", bytearray(b"x")),)
    assert flowkey._canonical == before  # unhashable: computed, not kept


def test_instructions_compare_in_any_order_and_odd_duplicates_still_compare():
    from os_ken.ofproto import ofproto_v1_3 as ofp
    from os_ken.ofproto import ofproto_v1_3_parser as parser

    from viplanes.controller.compile.flowkey import instructions_key

    apply = parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(2)])
    write = parser.OFPInstructionActions(ofp.OFPIT_WRITE_ACTIONS, [parser.OFPActionOutput(3)])
    meter, goto = parser.OFPInstructionMeter(7), parser.OFPInstructionGotoTable(1)
    one = instructions_key([apply, write, meter, goto])
    assert one == instructions_key([goto, meter, write, apply]) == instructions_key([meter, goto, apply, write])
    assert one != instructions_key([apply, meter, goto])
    # not a well-formed flow (two meters), but two orders of it must still compare equal
    assert instructions_key([parser.OFPInstructionMeter(1), parser.OFPInstructionMeter(2)]) == instructions_key(
        [parser.OFPInstructionMeter(2), parser.OFPInstructionMeter(1)]
    )
