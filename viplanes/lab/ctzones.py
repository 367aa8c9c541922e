"""A conntrack zone base of its own for each lab run or test session on this machine.

Conntrack is per datapath: every bridge of one ovs-vswitchd shares the zones, so two labs (or a
lab and a test) of the same topology file numbered their zones alike and flushed each other's
connections (issue 43: 21 of 28 return packets dropped while two other labs ran). Each run claims
a slot of ``SLOT_WIDTH`` zones above the default deployment's block, chosen from its run id and
held by an advisory lock (``flock``) for as long as the claiming process keeps it, so two runs at
once never hold the same slot, and a crashed run's slot is free again (the kernel drops its
lock). The slot is handed to ``viplanes serve`` as ``VIPLANES_CT_ZONE_BASE``.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from viplanes.config import CT_ZONE_BASE_ENV
from viplanes.topologies.model import Topology
from viplanes.topologies.zones import CT_ZONE_BASE_DEFAULT, CT_ZONE_MAX, ct_zones_needed

SLOT_WIDTH = 0x400  # zones per run: the lab's campuses need ~40 (1 + a /27 pool + their hosts)
SLOTS = (CT_ZONE_MAX + 1 - CT_ZONE_BASE_DEFAULT) // SLOT_WIDTH  # slot 0 is the default's own
LOCK_DIR = Path(tempfile.gettempdir()) / "viplanes-ctzones"


class ZoneSlotError(RuntimeError):
    """No slot is free, or the topology needs more zones than a slot holds."""


def slot_base(slot: int) -> int:
    """The first zone of a slot (slot 0: the default deployment's base, never claimed here)."""
    if not 0 <= slot < SLOTS:
        raise ValueError(f"zone slot {slot} outside 0..{SLOTS - 1}")
    return CT_ZONE_BASE_DEFAULT + slot * SLOT_WIDTH


def check_fits(topo: Topology) -> None:
    """A run's zones must stay inside its slot, or it would reach into the next run's."""
    needed = ct_zones_needed(topo.lane_pool.prefix, len(topo.hosts))
    if needed > SLOT_WIDTH:
        raise ZoneSlotError(f"{topo.name} needs {needed} conntrack zones, a lab slot holds {SLOT_WIDTH}")


@dataclass
class ZoneClaim:
    """A held slot: ``base`` is this run's ``VIPLANES_CT_ZONE_BASE`` until ``release``."""

    slot: int
    base: int
    fd: int

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = -1


def claim_zone_base(run_id: str, lock_dir: Path = LOCK_DIR) -> ZoneClaim:
    """Claim the first free slot, starting from one derived from ``run_id``."""
    lock_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    start = zlib.crc32(run_id.encode())
    for k in range(SLOTS - 1):
        slot = 1 + (start + k) % (SLOTS - 1)
        try:
            fd = os.open(lock_dir / f"slot-{slot}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            continue  # another user's lock file: treat the slot as taken
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return ZoneClaim(slot, slot_base(slot), fd)
    raise ZoneSlotError(f"every one of {SLOTS - 1} conntrack zone slots is held ({lock_dir})")


def claim_for_env(env: dict[str, str], topo: Topology, run_id: str, lock_dir: Path = LOCK_DIR) -> ZoneClaim | None:
    """Put a claimed slot's base into a child's environment, unless it has one already (a test
    session or the operator chose): the claim to release when the child is gone, or None."""
    if env.get(CT_ZONE_BASE_ENV):
        return None
    check_fits(topo)
    claim = claim_zone_base(run_id, lock_dir)
    env[CT_ZONE_BASE_ENV] = str(claim.base)
    return claim
