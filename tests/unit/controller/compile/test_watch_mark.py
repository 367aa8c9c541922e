"""The DSCP proof of a NAT mapping (issue 32): the access switch's watch marks the pre-NAT
connection with a nonce, the border's watch counts the nonce on the proposed post-NAT tuple and
puts the original DSCP back. The abuse: forged samples pair connection A with connection B's NAT
mapping (same destination, port and rate); B's packets never carry A's nonce, so the border
counts 0 and the mapping is refused, where the old count-only watches agreed and confirmed it."""

from __future__ import annotations

import dataclasses
import ipaddress
from typing import Any

import pytest

from tests.support.netsim import Network
from tests.support.packets import Packet, ip_packet
from viplanes.auto.natmap import NONCES, confirmed, pick_nonce, watches_for
from viplanes.controller.compile import watch
from viplanes.controller.compile.base import compile_base
from viplanes.controller.compile.cookies import is_app_cookie
from viplanes.controller.runtime.watching import watch_counts
from viplanes.domain.sighting import Sighting, SightingKind, SightingState
from viplanes.domain.values import FlowWatch, NatMapping, WatchMark
from viplanes.topologies.model import Topology

CLOUD, NAT_BOX, NONCE = "203.0.113.10", "198.51.100.2", 11
A_NAT_PORT, B_NAT_PORT = 51234, 52000  # what the NAT chose for the desktop (A) and the server (B)
PRE = FlowWatch("s1", 1, "10.1.0.10", CLOUD, "tcp", 40000, 5201, WatchMark(0, NONCE))
POST_A = FlowWatch("s3", 1, NAT_BOX, CLOUD, "tcp", A_NAT_PORT, 5201, WatchMark(NONCE, 0))
POST_B = dataclasses.replace(POST_A, src_port=B_NAT_PORT)  # the forged pairing's proposal
SWEEP = dataclasses.replace(POST_A, src_port=None)  # restores the nonce out of any other NAT port


def from_desktop(topo: Topology) -> Packet:
    fw = next(mb for mb in topo.middleboxes if mb.kind != "nat")
    return ip_packet(topo.host("desktop").iface.mac, fw.inside.mac, "10.1.0.10", CLOUD)


def from_nat(topo: Topology, nat_port: int, dscp: int) -> Packet:
    """What the NAT box sends out: Linux forwarding and MASQUERADE keep the DSCP it received."""
    box = next(mb for mb in topo.middleboxes if mb.kind == "nat")
    pkt = ip_packet(box.outside.mac, topo.edge.inside.mac, NAT_BOX, CLOUD, src_port=nat_port)
    return {**pkt, "ip_dscp": dscp}


def inject_from_nat(net: Network, topo: Topology, pkt: Packet) -> list[Any]:
    box = next(mb for mb in topo.middleboxes if mb.kind == "nat")
    assert box.outside.attach is not None
    return net.inject(box.outside.attach, pkt)


def test_the_access_switch_marks_and_the_border_restores(topo: Topology) -> None:
    net = Network(topo)
    net.install(compile_base(topo))
    net.install({topo.switch("s1").dpid: [watch.compile_watch(PRE, watch.watch_cookie(1))]})
    net.install({topo.switch("s3").dpid: [watch.compile_watch(POST_A, watch.watch_cookie(2))]})
    net.install({topo.switch("s3").dpid: [watch.compile_watch(SWEEP, watch.watch_cookie(3))]})
    (leaving,) = net.send_from_host("desktop", from_desktop(topo))
    assert leaving.kind == "NORMAL" and leaving.packet["ip_dscp"] == NONCE  # marked on its way to the NAT
    (out,) = inject_from_nat(net, topo, from_nat(topo, A_NAT_PORT, NONCE))
    assert out.kind == "NORMAL" and out.packet["ip_dscp"] == 0  # the cloud sees the DSCP it was sent with
    (unmarked,) = inject_from_nat(net, topo, from_nat(topo, A_NAT_PORT, 0))
    assert unmarked.kind == "NORMAL" and unmarked.packet["ip_dscp"] == 0  # not counted, not changed
    (elsewhere,) = inject_from_nat(net, topo, from_nat(topo, 53000, NONCE))  # a wrong proposal's case
    assert elsewhere.packet["ip_dscp"] == 0  # restored by the sweep, and counted as a stray
    counts = {f.cookie: f.packet_count for t in net.tables.values() for f in t.flows if not is_app_cookie(f.cookie)}
    assert counts == {watch.watch_cookie(1): 1, watch.watch_cookie(2): 1, watch.watch_cookie(3): 1}


def test_the_mark_set_the_match_and_the_restore_as_data() -> None:
    pre, post = watch.compile_watch(PRE, watch.watch_cookie(1)), watch.compile_watch(POST_A, watch.watch_cookie(2))
    assert dict(pre.match.items())["ip_dscp"] == 0 and dict(post.match.items())["ip_dscp"] == NONCE
    (pre_actions,), (post_actions,) = pre.instructions, post.instructions
    assert [(a.key, a.value) for a in pre_actions.actions[:-1]] == [("ip_dscp", NONCE)]  # DSCP only: ECN kept
    assert [(a.key, a.value) for a in post_actions.actions[:-1]] == [("ip_dscp", 0)]
    unmarked = watch.compile_watch(dataclasses.replace(PRE, mark=None), 3)
    assert "ip_dscp" not in dict(unmarked.match.items()) and len(unmarked.instructions[0].actions) == 1
    with pytest.raises(ValueError):
        watch.compile_watch(dataclasses.replace(PRE, mark=WatchMark(0, 64)), 4)


class Wire:
    """The runtime's wire over the simulated campus, recording what it sends and where."""

    def __init__(self, net: Network) -> None:
        self.net = net
        self.sent: list[tuple[int, Any]] = []

    def apply(self, per_dpid: dict[int, list[Any]], timeout_s: float) -> str | None:
        self.sent += [(dpid, m) for dpid, msgs in per_dpid.items() for m in msgs]
        self.net.install(per_dpid)
        return None

    def flow_stats(self, dpid: int, cookie: int, cookie_mask: int, timeout_s: float = 2.0) -> list[Any] | None:
        return [f.as_stats(0) for f in self.net.tables[dpid].flows if f.cookie & cookie_mask == cookie]


def both_uploads(net: Network, topo: Topology, packets: int, b_dscp: int = 0) -> None:
    """A (the desktop) and B (the server, both behind the NAT) upload to the same place at the
    same rate: A's packets leave the NAT box with whatever DSCP the access switch gave them, B's
    with ``b_dscp`` (what B's host sent)."""
    for _ in range(packets):
        (a,) = net.send_from_host("desktop", from_desktop(topo))
        inject_from_nat(net, topo, from_nat(topo, A_NAT_PORT, a.packet.get("ip_dscp", 0)))
        inject_from_nat(net, topo, from_nat(topo, B_NAT_PORT, b_dscp))


def watched(topo: Topology, watches: list[FlowWatch], b_dscp: int = 0) -> list[int] | None:
    net = Network(topo)
    net.install(compile_base(topo))
    tokens = iter(range(10, 20))
    return watch_counts(
        Wire(net), topo, watches, 0.8, lambda: next(tokens), sleep=lambda s: both_uploads(net, topo, 40, b_dscp)
    )


def test_a_forged_pairing_with_another_connection_counts_nothing(topo: Topology) -> None:
    """Marked (today): the border counts 0 of B's packets, and A's 40 come out by A's own NAT
    port (strays): not confirmed. Count-only (the old rule, the same traffic): both watches
    count 40, the forged mapping was confirmed."""
    counts = watched(topo, [PRE, POST_B, SWEEP])
    assert counts == [40, 0, 40] and not confirmed(counts[0], counts[1], strays=counts[2])
    old = watched(topo, [dataclasses.replace(w, mark=None) for w in (PRE, POST_B)])
    assert old == [40, 40] and confirmed(*old)  # the hole this closes
    truth = watched(topo, [PRE, POST_A, SWEEP])
    assert truth == [40, 40, 0] and confirmed(truth[0], truth[1], strays=truth[2])  # A's nonce, A's port


def test_a_host_that_guesses_the_nonce_is_caught_by_the_strays(topo: Topology) -> None:
    """B's owner forges the samples and marks B's own packets with the nonce (a 1 in 16 guess):
    the border counts 40 on B's tuple, but A's marked packets still leave by A's real port."""
    counts = watched(topo, [PRE, POST_B, SWEEP], b_dscp=NONCE)
    assert counts == [40, 40, 40]
    assert confirmed(counts[0], counts[1]) and not confirmed(counts[0], counts[1], strays=counts[2])


def test_the_restore_goes_in_first_and_comes_out_last(topo: Topology) -> None:
    """A nonce must never reach the cloud: the border's watches are installed before the access
    switch's, removed after it, and their hard timeouts (should the controller die) are longer."""
    net = Network(topo)
    net.install(compile_base(topo))
    wire = Wire(net)
    tokens = iter([1, 2, 3])
    assert watch_counts(wire, topo, [PRE, POST_A, SWEEP], 0.5, lambda: next(tokens), sleep=lambda s: None) == [0] * 3
    s1, s3 = topo.switch("s1").dpid, topo.switch("s3").dpid
    sent = [(dpid, m.command, m.cookie & 0xFFFFFFFF, m.hard_timeout, m.priority) for dpid, m in wire.sent]
    adds = [(s3, 0, 3, 6, 1), (s3, 0, 2, 5, 2), (s1, 0, 1, 4, 2)]  # the sweep one priority below the exact
    any_priority = 0x8000  # a non-strict delete by cookie: its priority is not looked at
    assert sent == [*adds, *[(dpid, 3, token, 0, any_priority) for dpid, token in [(s1, 1), (s3, 2), (s3, 3)]]]
    assert not [f for t in net.tables.values() for f in t.flows if not is_app_cookie(f.cookie)]


def test_the_nonce_is_random_and_never_the_flows_own() -> None:
    assert len(NONCES) == 16 and all(d % 4 == 3 for d in NONCES)  # RFC 2474 pool 2 (xxxx11), local use
    assert {pick_nonce() for _ in range(400)} == set(NONCES)
    assert 3 not in {pick_nonce(3) for _ in range(200)}
    assert pick_nonce(0, choose=lambda xs: xs[0]) == 3 and pick_nonce(3, choose=lambda xs: xs[0]) == 7


def test_the_watches_refuse_a_nonce_that_is_no_mark(topo: Topology) -> None:
    desktop, cloud = ipaddress.ip_address("10.1.0.10"), ipaddress.ip_address(CLOUD)
    s = Sighting(SightingKind.SFLOW, SightingState.ONGOING, desktop, cloud, 6, 40000, 5201, 0.0, rate_bps=8e6)
    for bad in (0, 64, -1):
        with pytest.raises(ValueError):
            watches_for(topo, s, NatMapping(NAT_BOX, A_NAT_PORT), nonce=bad)
    assert watches_for(topo, s, NatMapping(NAT_BOX, A_NAT_PORT), nonce=NONCE) == [PRE, POST_A, SWEEP]


class Firewall:
    """The campus path behind a rate cap: of what the desktop sends while the watch counts, only
    ``passes`` packets reach the NAT box; the rest wait in the firewall's queue (with the DSCP
    they were marked with) and come out at the next wait. B uploads alongside, pre-marked with
    ``b_dscp`` (a forger's guess of the nonce, or 0)."""

    def __init__(self, net: Network, topo: Topology, passes: int, b_dscp: int = 0) -> None:
        self.net, self.topo, self.passes, self.b_dscp = net, topo, passes, b_dscp
        self.queued: list[int] = []
        self.waits: list[float] = []
        self.left: list[int] = []  # the DSCP of A's packets as they left the border for the cloud

    def wait(self, seconds: float) -> None:
        self.waits.append(seconds)
        for _ in range(40 if len(self.waits) == 1 else 0):
            (a,) = self.net.send_from_host("desktop", from_desktop(self.topo))
            self.queued.append(a.packet.get("ip_dscp", 0))
            inject_from_nat(self.net, self.topo, from_nat(self.topo, B_NAT_PORT, self.b_dscp))
        out, self.queued = (
            (self.queued[: self.passes], self.queued[self.passes :])
            if len(self.waits) == 1
            else (
                self.queued,
                [],
            )
        )
        for dscp in out:
            sent = inject_from_nat(self.net, self.topo, from_nat(self.topo, A_NAT_PORT, dscp))
            self.left += [o.packet.get("ip_dscp", 0) for o in sent]


def queued_watch(topo: Topology, watches: list[FlowWatch], passes: int, b_dscp: int = 0) -> tuple[Any, Firewall, Wire]:
    net = Network(topo)
    net.install(compile_base(topo))
    firewall, wire, tokens = Firewall(net, topo, passes, b_dscp), Wire(net), iter(range(10, 20))
    return watch_counts(wire, topo, watches, 0.8, lambda: next(tokens), sleep=firewall.wait), firewall, wire


def test_marked_packets_queued_behind_the_firewall_are_waited_for(topo: Topology) -> None:
    """Issue 44: 768 marked, 486 out when read together. The border's count falls short, so an
    unmarking flow stops the mark and the counts are read again once the queue came out: the
    true mapping is confirmed (read at once it was ``nat_unconfirmed``), nothing left behind."""
    counts, firewall, wire = queued_watch(topo, [PRE, POST_A, SWEEP], passes=20)
    assert counts == [40, 40, 0] and confirmed(counts[0], counts[1], strays=counts[2]), counts
    assert firewall.waits == [0.8, 0.2]  # one drain step: the queue was out at the first re-read
    assert not [f for t in wire.net.tables.values() for f in t.flows if not is_app_cookie(f.cookie)]
    unmarks = [m for _, m in wire.sent if m.command == 0 and m.priority == watch.PRIORITY_UNMARK]
    assert len(unmarks) == 1 and not unmarks[0].instructions[0].actions[:-1]  # NORMAL, no rewrite


def test_the_drain_still_fails_the_forger(topo: Topology) -> None:
    """The forger of issue 32 (B's tuple proposed for A, B pre-marking its packets with the
    nonce), with A's marked packets queued: the strays count A's packets over the drain too."""
    counts, _, _ = queued_watch(topo, [PRE, POST_B, SWEEP], passes=20, b_dscp=NONCE)
    assert counts is not None and counts[2] > 8 and not confirmed(counts[0], counts[1], strays=counts[2]), counts
    counts, firewall, _ = queued_watch(topo, [PRE, POST_B, SWEEP], passes=20)  # B's packets unmarked
    assert counts == [40, 0, 20] and not confirmed(counts[0], counts[1], strays=counts[2]), counts
    assert firewall.waits == [0.8, 0.2]  # refused at the first reading; one step lets the queue out


def test_a_refusal_at_the_first_reading_lets_no_nonce_leave(topo: Topology) -> None:
    """CI saw 2 marked packets reach the cloud: the forger was refused at the first reading (A's
    packets already counted by A's own port), its watches removed at once, and A's last marked
    packets, still queued behind the firewall, left the border with the nonce. The marking now
    stops first and the restores stay until the border has counted what was marked."""
    _, firewall, wire = queued_watch(topo, [PRE, POST_B, SWEEP], passes=20)
    firewall.wait(0.0)  # whatever was still queued comes out after the watch ended
    assert len(firewall.left) == 40 and NONCE not in firewall.left, firewall.left
    assert not [f for t in wire.net.tables.values() for f in t.flows if not is_app_cookie(f.cookie)]


class SlowFirewall:
    """Issue 44's busy machine: the desktop's ``sent`` marked packets come out at the NAT box
    ``passes`` at the first wait, then ``per_wait`` at each later one (the firewall's queue, the userspace datapath's
    receive queues, the counter refresh); each read of the counters takes ``read_s``."""

    def __init__(self, net: Network, topo: Topology, sent: int, passes: int, per_wait: int, read_s: float) -> None:
        self.net, self.topo, self.sent, self.per_wait, self.read_s = net, topo, sent, per_wait, read_s
        self.queued: list[int] = []
        self.waits: list[float] = []
        self.t, self.passes = 0.0, passes

    def wait(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.t += seconds
        if len(self.waits) == 1:
            for _ in range(self.sent):
                (a,) = self.net.send_from_host("desktop", from_desktop(self.topo))
                self.queued.append(a.packet.get("ip_dscp", 0))
        n = self.passes if len(self.waits) == 1 else self.per_wait
        out, self.queued = self.queued[:n], self.queued[n:]
        for dscp in out:
            inject_from_nat(self.net, self.topo, from_nat(self.topo, A_NAT_PORT, dscp))

    def now(self) -> float:
        self.t += self.read_s  # the clock is read once per reading of the three counters
        return self.t


def slow_watch(topo: Topology, per_wait: int, read_s: float = 0.0) -> tuple[Any, SlowFirewall]:
    """The true mapping's watch: 200 marked, 50 out at the first read, ``per_wait`` per step."""
    net = Network(topo)
    net.install(compile_base(topo))
    fw, tokens = SlowFirewall(net, topo, 200, 50, per_wait, read_s), iter(range(10, 20))
    watches = [PRE, POST_A, SWEEP]
    return watch_counts(Wire(net), topo, watches, 0.8, lambda: next(tokens), sleep=fw.wait, clock=fw.now), fw


def test_a_queue_slower_than_a_second_is_waited_for(topo: Topology) -> None:
    """Issue 44: the border fell short still after the fixed 1 s drain (five 0.2 s steps: 50 +
    5 x 12 of 200 out, ``nat_unconfirmed``). The drain reads on while the border's count grows:
    146 of 200 at the eighth step (1.6 s), confirmed."""
    counts, fw = slow_watch(topo, per_wait=12)
    assert counts == [200, 146, 0] and confirmed(counts[0], counts[1], strays=counts[2]), counts
    assert fw.waits == [0.8] + [0.2] * 8


def test_the_drain_ends_when_the_border_stops_growing(topo: Topology) -> None:
    """A border that stops short (what never comes out: lost, or another tuple's) is refused once
    its count stayed for ``SETTLE_S``, before the time to wait runs out; and the drain's time
    counts the reads too, not only the waits between them (a busy switch answers slowly)."""
    counts, fw = slow_watch(topo, per_wait=0)
    assert counts == [200, 50, 0] and not confirmed(counts[0], counts[1], strays=counts[2])
    assert fw.waits == [0.8] + [0.2] * 5  # unchanged from the first drain read to the fifth: 0.8 s
    counts, fw = slow_watch(topo, per_wait=1, read_s=0.3)
    assert counts is not None and not confirmed(counts[0], counts[1], strays=counts[2])
    assert fw.waits == [0.8] + [0.2] * 4  # 0.5 s a step: the reading at 2.0 s is past the 1.6 s budget
    assert fw.t <= 0.8 + 0.3 + 1.6 + 0.2 + 0.3 + 1e-9, fw.t  # the first read, the budget, a step, a read
