"""How long does reading back N lanes' flows cost in os-ken, and what would a lean parser cost?

    .venv/bin/python -m bench.probes.parse_experiment --lanes 10000

Builds the flow-stats reply body a switch would send for the compiled flows (entry header +
the exact match and instruction bytes we serialise), then times os-ken's ``OFPFlowStats.parser``
(what ``reconcile`` pays today) against a struct-only parse into comparable keys
(table, priority, cookie, sorted OXM TLVs, raw instructions). Evidence for a proposal, not product code.
"""

from __future__ import annotations

import argparse
import struct
import time

ENTRY = struct.Struct("!HBxIIHHHH4xQQQ")  # length, table, duration s/ns, prio, idle, hard, flags, cookie, pkts, bytes


def body_for(flowmods: list) -> bytes:  # type: ignore[type-arg]
    from os_ken.ofproto import ofproto_v1_3 as ofp
    from os_ken.ofproto import ofproto_v1_3_parser as parser

    class _DP:
        ofproto, ofproto_parser = ofp, parser

    out = bytearray()
    for fm in flowmods:
        fm.datapath = _DP()
        fm.serialize()
        buf = bytes(fm.buf)
        # FlowMod: 8 header + 40 fixed (cookie..pad) then match (padded to 8) then instructions
        tail = buf[48:]
        length = ENTRY.size + len(tail)
        out += (
            ENTRY.pack(
                length, fm.table_id, 12, 0, fm.priority, fm.idle_timeout, fm.hard_timeout, fm.flags, fm.cookie, 0, 0
            )
            + tail
        )
    return bytes(out)


def lean_keys(body: bytes) -> list[tuple]:  # type: ignore[type-arg]
    keys = []
    off, end = 0, len(body)
    unpack_entry, unpack_u16, unpack_u32 = (
        ENTRY.unpack_from,
        struct.Struct("!H").unpack_from,
        struct.Struct("!I").unpack_from,
    )
    while off < end:
        length, table, _, _, prio, _, _, _, cookie, _, _ = unpack_entry(body, off)
        m = off + ENTRY.size
        mlen = unpack_u16(body, m + 2)[0]
        tlvs = []
        p, mend = m + 4, m + mlen
        while p < mend:
            hdr = unpack_u32(body, p)[0]
            n = hdr & 0xFF
            tlvs.append((hdr, body[p + 4 : p + 4 + n]))
            p += 4 + n
        inst = body[m + ((mlen + 7) // 8) * 8 : off + length]
        keys.append((table, prio, cookie, tuple(sorted(tlvs)), inst))
        off += length
    return keys


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lanes", type=int, default=10_000)
    args = ap.parse_args(argv)

    from os_ken.ofproto import ofproto_v1_3_parser as parser

    from bench.harness.workload import flows, lane_spec
    from viplanes.api.app import default_topology
    from viplanes.controller.compile.flowkey import flow_key_of
    from viplanes.controller.compile.lane import compile_lane

    topo = default_topology()
    now = time.time()
    fms = []
    for i, f in enumerate(flows(args.lanes)):
        fms += compile_lane(lane_spec(topo, i + 1, "dtn", f, now=now), topo, now)[3]
    body = body_for(fms)
    t0 = time.perf_counter()
    entries = []
    off = 0
    while off < len(body):
        entry = parser.OFPFlowStats.parser(body, off)
        entries.append(entry)
        off += entry.length
    t1 = time.perf_counter()
    keys = [flow_key_of(e) for e in entries]
    t2 = time.perf_counter()
    lean = lean_keys(body)
    t3 = time.perf_counter()
    assert len(lean) == len(entries) == len(fms) and len(set(lean)) == len(set(keys))
    print(f"{len(fms)} flows ({len(body) / 1e6:.1f} MB of flow stats)")
    print(f"  os-ken OFPFlowStats.parser : {t1 - t0:6.2f} s")
    print(f"  flow_key_of on the entries : {t2 - t1:6.2f} s")
    print(f"  lean struct parse + keys   : {t3 - t2:6.2f} s")


if __name__ == "__main__":
    main()
