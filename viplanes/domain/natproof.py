"""The proof of a NAT mapping from the watch counters, and when to stop reading them. Pure.

The access switch marks the pre-NAT connection's packets with a DSCP nonce; the border counts
the nonce on the proposed post-NAT tuple (``proposed``) and out of any other NAT port
(``strays``). ``confirmed`` judges one reading of the three counters. The counters are not read
at one instant of the packets' lives: marked packets are still on their way to the border when
the access switch's counter says they were marked (the campus firewall's queue, the userspace
datapath's receive queues on a busy machine, the switches' counter refresh), so a true mapping
read once can come out short (768 marked, 486 out).

``judge`` answers whether to read again. Once the mark has stopped (the glue puts an unmarking
flow over it), the marked count can only stay and the border's counts can only grow toward it,
so the far side that stopped growing for ``settle_s`` has delivered what it will: the answer is
final either way. Reading again never helps a forger: each reading is judged by the same
``confirmed``, the strays only grow (a forger's refusal stays one), and another connection's
tuple counts no nonce however long it is watched (docs/automatic-lanes.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

TOLERANCE = 0.25  # watch counts agree when they differ by at most 25 % of the larger
SLACK_PACKETS = 8  # plus this many packets (in flight between the two switches)
MIN_PACKETS = 16  # each watch must count at least this many: a switch's flow counters lag (OVS
# pushes its datapath's counts to the rules every ~0.5 s), and 1 against 1 proves nothing
SETTLE_S = 0.8  # the border's counts unchanged this long after the mark stopped: nothing more is
# on its way (longer than one counter refresh of OVS, 0.5 s, on a busy machine)


def confirmed(
    pre_packets: int,
    post_packets: int,
    tolerance: float = TOLERANCE,
    slack: int = SLACK_PACKETS,
    least: int = MIN_PACKETS,
    strays: int = 0,
) -> bool:
    """The access switch marked at least ``least`` of the connection's packets, the border
    counted about as many carrying the mark on the proposed tuple, and at most ``slack`` marked
    ones came out of the NAT box by any other port (``strays``): that tuple carries what the
    pre-NAT tuple sends, so it is this connection's mapping. A port the NAT did not choose, and
    another connection's mapping, count 0 marked packets. A host that pre-marks its own
    connection with a guessed nonce (1 in 16) still fails: the watched connection's marked
    packets then leave by its real port and count as strays. The agreement rule keeps the
    minimum and refuses a proposal that carries only part of the connection."""
    if pre_packets < least or post_packets < least or strays > slack:
        return False
    return abs(pre_packets - post_packets) <= tolerance * max(pre_packets, post_packets) + slack


@dataclass(frozen=True)
class Reading:
    """One read of the three watch counters, ``at`` seconds after the first read."""

    at: float
    marked: int  # marked at the access switch
    proposed: int  # carrying the nonce on the proposed post-NAT tuple
    strays: int  # carrying the nonce out of any other NAT port
    marking: bool  # the mark was still being set when read (before the unmarking flow)

    @classmethod
    def of(cls, at: float, counts: Sequence[int], marking: bool) -> Reading:
        """From the glue's counts, upstream first (marked, proposed, strays)."""
        marked, proposed, strays = (*counts, 0)[:3]
        return cls(at, marked, proposed, strays, marking)

    def agrees(self) -> bool:
        return confirmed(self.marked, self.proposed, strays=self.strays)


class Verdict(StrEnum):
    """What the readings so far say: read again (``WAIT``), or a final answer."""

    CONFIRMED = "confirmed"  # the latest reading agrees
    WAIT = "wait"  # the border's counts may still grow toward the marked count
    STRAYS = "strays"  # marked packets left by another NAT port: never confirmed later
    TOO_FEW = "too_few"  # fewer than ``least`` marked: the connection sends too little to prove
    SETTLED = "settled"  # the mark stopped and nothing changed for ``settle_s``: final
    TIMED_OUT = "timed_out"  # still changing when the time to wait ran out


def judge(
    readings: Sequence[Reading],
    budget_s: float,
    settle_s: float = SETTLE_S,
    slack: int = SLACK_PACKETS,
    least: int = MIN_PACKETS,
) -> Verdict:
    """The verdict of the readings so far (oldest first, at least one). ``budget_s``: how long
    after the first read the glue may read again."""
    last = readings[-1]
    if last.agrees():
        return Verdict.CONFIRMED
    if last.strays > slack:
        return Verdict.STRAYS
    if last.marked < least:
        return Verdict.TOO_FEW
    if not last.marking and _unchanged_since(readings, last.at - settle_s):
        return Verdict.SETTLED
    if last.at >= budget_s:
        return Verdict.TIMED_OUT
    return Verdict.WAIT


def _unchanged_since(readings: Sequence[Reading], since: float) -> bool:
    """A reading taken after the mark stopped, at or before ``since``, equals the latest: the
    counts only grow, so nothing changed in between."""
    last = readings[-1]
    counts = (last.marked, last.proposed, last.strays)
    return any(
        not r.marking and r.at <= since + 1e-9 and (r.marked, r.proposed, r.strays) == counts for r in readings[:-1]
    )
