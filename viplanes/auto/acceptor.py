"""The acceptor: the one ``SightingSink`` that turns a sighting into an automatic lane.

``offer`` runs on a detector's receive loop, so it only does the cheap, memory-only checks (is the
flow inside an automation-enabled grant, is a firefly from the address the lane would carry, is
its sender within its rate) and hands the rest to one worker thread through a bounded queue (full:
dropped and counted). The worker re-reads the switch and the grant's policy (an operator's "off"
counts at once), checks the threshold and the per-grant count, and asks the lane manager for a
normal lane owned by the grant's principal, with the trigger recorded. Every refusal is a counter.

A sampled flow of a host behind the campus NAT is already running under the NAT's address and
port: its lane must keep them (``natmap``). The worker pairs it with the post-NAT flow the border
sampled, confirms the pair with two watch flows over OpenFlow, and asks for a takeover lane;
anything unpaired, ambiguous or unconfirmed gets no lane, and a firefly naming such a flow is
refused as before (``nat_in_flight``). A sighting with no post-NAT pair yet is held a moment
(``nathold``) and judged again, from the start, when the border's sighting of it arrives.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

from viplanes.authz.tokens import Caller
from viplanes.auto.bounds import SourceBound, source_prefix
from viplanes.auto.campusnat import nat_outside_addresses, translated_sources
from viplanes.auto.fairqueue import FairQueue
from viplanes.auto.index import AutoGrant, GrantIndex
from viplanes.auto.nathold import HOLD_S, MAX_HELD, HeldSightings
from viplanes.auto.natmap import ORIGINAL_DSCP, NatPairing, confirmed, pick_nonce, watches_for
from viplanes.auto.policy import PROTOCOLS, evidence, trigger_refusal
from viplanes.domain.sighting import IPAddress, Sighting, SightingKind, SightingState
from viplanes.domain.values import NatMapping
from viplanes.errors import VipError
from viplanes.lanes.desk import LaneDesk
from viplanes.lanes.requests import LaneTrigger
from viplanes.lanes.targets import LaneInput
from viplanes.store import automation as store

log = logging.getLogger(__name__)

THREAD_NAME = "viplanes-auto-acceptor"
WATCH_S = 0.8  # how long the two watch flows count before a takeover (docs/automatic-lanes.md)
REPEAT_S = 2.0  # a flow queued once is not queued again for this long
RECENT_MAX = 4096  # flows remembered for that; the memory is dropped when full


def system_caller(why: str) -> Caller:
    """The actor of an end automation takes (idle, firefly end, grant maximum): audited by name."""
    return Caller(0, f"auto:{why}", "operator")


class Acceptor:
    """Implements ``viplanes.domain.sighting.SightingSink``."""

    def __init__(
        self,
        lanes: LaneDesk,
        queue_size: int = 256,
        refresh_s: float = 1.0,
        firefly_rate: float = 5.0,
        firefly_burst: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        nat_sources: frozenset[IPAddress] | None = None,
        watch_s: float = WATCH_S,
        nat_takeover: bool = True,
        nat_hold_s: float = HOLD_S,
        nat_hold_max: int = MAX_HELD,
    ) -> None:
        ctx = lanes.context  # read once: the acceptor keeps only what it uses
        self._lanes = lanes
        self._db, self._topology, self._lane_clock = ctx.db, ctx.topology, ctx.clock
        self._plane = ctx.dataplane  # its watch flows confirm a NAT mapping
        self.counts: Counter[str] = Counter()
        self.latencies_s: list[float] = []  # sighting observed -> lane answered, last 1000
        self._queue: FairQueue[Sighting] = FairQueue(queue_size)  # per grant, per source prefix
        self._bound = SourceBound(firefly_rate, firefly_burst)
        self._index = GrantIndex([])
        self.refreshes = 0  # the grant index's generation (/metrics): a test polls it, never sleeps
        self._queued: dict[tuple[object, ...], float] = {}  # flow -> when it was last queued
        self._refresh_s = refresh_s
        self._refreshed = -1e18
        self._clock = clock  # the monotonic clock the rate bound and the refresh read
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        # sources whose running flows a lane would cut (default: the topology's NAT'd hosts)
        self._translated = translated_sources(ctx.topology) if nat_sources is None else nat_sources
        # the post-NAT flows the border sampled (bounded), to pair a translated source's flow with
        self._pairing = NatPairing(nat_outside_addresses(ctx.topology))
        # pre-NAT sightings waiting (bounded) for their post-NAT pair; the pairing and the holds
        # are shared by the detector's thread (``note``, ``release``) and the worker's (``pair``)
        self._held = HeldSightings(nat_hold_s, nat_hold_max)
        self._nat_lock = threading.Lock()
        self._watch_s = watch_s
        # False: every running NAT'd flow is refused (``nat_in_flight``), as before takeovers: for
        # a campus whose firewall tracks TCP windows strictly, where a takeover lane's end cuts a
        # connection that is still running (docs/automatic-lanes.md)
        self._nat_takeover = nat_takeover
        self.takeover_s: list[float] = []  # sighting -> mapping confirmed, last 1000

    # --- the detector's side: memory only ------------------------------------------------------

    def offer(self, sighting: Sighting) -> None:
        try:
            self._offer(sighting)
        except Exception:  # a detector's loop must never see our failure
            self.counts["errors"] += 1
            log.exception("offer")

    def may_concern(self, src: IPAddress, dst: IPAddress) -> bool:
        """The detectors' prefilter, from the same grant index (read without a lock: the index is
        immutable and swapped whole on refresh)."""
        if src in self._pairing.nat_addresses:  # a post-NAT flow: kept only as a pairing candidate
            return self._index.may_reach(dst)
        return self._index.may_concern(src, dst)

    def rate_floor(self, src: IPAddress, dst: IPAddress, protocol: int, dst_port: int | None) -> float:
        """The detectors' per-flow threshold (bit/s), from the same index: a flow is sighted only
        once it reaches a rate some grant covering it lanes at; a post-NAT flow at the lowest such
        rate towards its destination (docs/automatic-lanes.md, "Detection from the switches")."""
        if src in self._pairing.nat_addresses:
            return self._index.rate_floor_to(dst, protocol, dst_port)
        return self._index.rate_floor(src, dst, protocol, dst_port)

    def _offer(self, s: Sighting) -> None:
        self.counts["offered"] += 1
        self._end_holds()
        if s.kind is SightingKind.SFLOW and s.src_ip in self._pairing.nat_addresses:
            if not self._index.may_reach(s.dst_ip):
                return
            with self._nat_lock:
                noted = self._pairing.note(s)
                released = self._held.release(s) if noted else []
            if noted:
                self.counts["nat_candidates"] += 1
            for held in released:  # its pair may have come: judged again, from the start
                self.counts["nat_released"] += 1
                self._put(held)
            return
        takeover_kind = self._nat_takeover and s.kind is SightingKind.SFLOW
        if s.src_ip in self._translated and s.src_port is not None and not takeover_kind:
            # the flow is already under way through the campus NAT and only a sampled one can be
            # paired with the NAT's mapping: on a lane-pool address the cloud would reset it
            self.counts["nat_in_flight"] += 1
            return
        if not self._index.candidates(s.src_ip, s.dst_ip, s.protocol, s.dst_port):
            self.counts["outside_grant"] += 1
            return
        if s.kind is SightingKind.FIREFLY:
            if s.reporter is None or s.reporter != s.src_ip:
                self.counts["spoofed_firefly"] += 1
                return
            if not self._bound.allow(s.reporter, self._clock()):
                self.counts["firefly_rate_bound"] += 1
                return
        if s.kind is SightingKind.FLOW_LABEL and not self._bound.allow(s.src_ip, self._clock()):
            self.counts["flow_label_rate_bound"] += 1  # marks, as fireflies, are bounded per source
            return
        if s.state is not SightingState.END and self._recent(s):
            self.counts["repeated"] += 1
            return
        self._put(s)

    def _put(self, s: Sighting) -> None:
        """Queue ``s`` in its grant's line (the first grant it may concern), its prefix's place."""
        grants = self._index.candidates(s.src_ip, s.dst_ip, s.protocol, s.dst_port)
        grant = grants[0].grant_id if grants else None
        if not self._queue.put(s, grant, source_prefix(s.src_ip)):
            self.counts["queue_full"] += 1
            self._forget(s)  # not judged: its next sighting may ask again

    @property
    def nat_held(self) -> int:
        """NAT'd sightings waiting for their post-NAT pair now (bounded: ``nathold.MAX_HELD``)."""
        return len(self._held)

    def _end_holds(self) -> None:
        """Held sightings whose hold ended with no post-NAT sighting: unpaired, as without a
        hold; the flow's next sighting is judged afresh."""
        with self._nat_lock:
            due = self._held.due(self._clock())
        for s in due:
            self.counts["nat_unpaired"] += 1
            self._forget(s)

    def _recent(self, s: Sighting) -> bool:
        """The same flow was queued less than ``REPEAT_S`` ago: a sampled elephant is seen many
        times a second, and one lane request per flow is enough (a refused one may ask again)."""
        now = self._clock()
        key = (s.src_ip, s.dst_ip, s.protocol, s.src_port, s.dst_port)
        if self._queued.get(key, -1e18) > now - REPEAT_S:
            return True
        if len(self._queued) >= RECENT_MAX:
            self._queued.clear()
        self._queued[key] = now
        return False

    # --- the worker ----------------------------------------------------------------------------

    def refresh(self) -> None:
        """Rebuild the grant index from the database (every ``refresh_s`` on the worker)."""
        now = self._lane_clock()
        with self._db.read() as s:
            self._index = GrantIndex(store.auto_grants(s, now))
        self._refreshed = self._clock()
        self.refreshes += 1  # one writer (the worker; ``start`` before it runs)

    @property
    def indexed_grants(self) -> int:
        """How many automatic grants the index holds now (what a sighting is matched against)."""
        return self._index.size

    def start(self) -> None:
        self.refresh()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._queue.wake()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            item = self._queue.get(timeout=self._refresh_s)
            try:
                if self._clock() - self._refreshed >= self._refresh_s:
                    self.refresh()
                self._end_holds()
                if item is not None:
                    self.handle(item)
            except Exception:
                self.counts["errors"] += 1
                log.exception("automatic lane")

    def run_pending(self) -> list[int | None]:
        """Decide every queued sighting on the calling thread (tests, and the bench without a worker)."""
        out: list[int | None] = []
        while True:
            self._end_holds()
            item = self._queue.get_nowait()
            if item is None:
                return out
            out.append(self.handle(item))

    def handle(self, s: Sighting) -> int | None:
        """Decide one sighting (the worker; tests call it directly). The lane's id, or None."""
        now = self._lane_clock()
        with self._db.read() as sess:
            if not store.automation_on(sess):
                self.counts["automation_off"] += 1
                return None
            ids = [g.grant_id for g in self._index.candidates(s.src_ip, s.dst_ip, s.protocol, s.dst_port)]
            grants = store.auto_grants(sess, now, ids) if ids else []
        if s.state is SightingState.END:
            return self._end_flow(s) if s.kind is SightingKind.FIREFLY else None
        if not grants:
            self.counts["grant_auto_off"] += 1
            return None
        why = "none"
        for g in grants:
            why = trigger_refusal(g.policy, s) or "none"
            if why != "none":
                continue
            with self._db.read() as sess:
                if store.live_auto_count(sess, g.grant_id) >= g.policy.max_auto_lanes:
                    why = "too_many_auto_lanes"
                    continue
            return self._make_lane(g, s)
        self.counts[why] += 1
        if why == "below_threshold":
            self._forget(s)
        return None

    def _forget(self, s: Sighting) -> None:
        """A flow refused for its rate may ask again at its next sighting: a young flow's estimate
        grows as its window fills, and holding it for ``REPEAT_S`` delayed its lane by seconds."""
        self._queued.pop((s.src_ip, s.dst_ip, s.protocol, s.src_port, s.dst_port), None)

    def _takeover(self, s: Sighting) -> tuple[NatMapping, dict[str, int]] | None:
        """The NAT's mapping of this running connection, paired from the samples and confirmed by
        two watch flows, with how it was confirmed (for the lane's record); None (counted) when
        there is no unique pair or the counters disagree."""
        if s.evidence.get("dscp", str(ORIGINAL_DSCP)) != str(ORIGINAL_DSCP):
            self.counts["nat_dscp"] += 1  # the watch marks only DSCP 0: no confirmation could come
            return None
        with self._nat_lock:  # pair and hold at once: a post-NAT note comes before or releases it
            self._pairing.expire(s.observed_at)
            found = self._pairing.pair(s)
            held = self._held.hold(s, self._clock()) if found.reason == "nat_unpaired" else "unholdable"
        if found.mapping is None:
            if held == "held":  # the border's sighting of it may be a moment behind
                self.counts["nat_held"] += 1
                return None
            if held == "full":
                self.counts["nat_hold_full"] += 1
            self.counts[found.reason] += 1
            self._forget(s)  # the post-NAT flow may be sampled later: judge the next sighting
            return None
        nonce = pick_nonce()
        watches = watches_for(self._topology, s, found.mapping, nonce)
        t0 = self._lane_clock()
        counts = self._plane.watch_counts(watches, self._watch_s) if watches else None
        if counts is None:
            self.counts["nat_unwatched"] += 1
            return None
        if not confirmed(counts[0], counts[1], strays=counts[2]):
            self.counts["nat_unconfirmed"] += 1
            log.warning(
                "NAT mapping %s:%d for %s:%s -> %s:%s not confirmed (marked %d packets, %d came out"
                " marked there, %d by other ports)",
                found.mapping.address,
                found.mapping.port,
                s.src_ip,
                s.src_port,
                s.dst_ip,
                s.dst_port,
                counts[0],
                counts[1],
                counts[2],
            )
            return None
        self.counts["nat_confirmed"] += 1
        now = self._lane_clock()
        self.takeover_s = [*self.takeover_s[-999:], now - s.observed_at]
        how = {
            "nat_confirm_ms": round((now - s.observed_at) * 1000),  # sighting -> confirmed
            "nat_watch_ms": round((now - t0) * 1000),
            "watch_pre_packets": counts[0],
            "watch_post_packets": counts[1],  # carrying the nonce, on the proposed tuple
            "watch_stray_packets": counts[2],  # carrying the nonce, out of any other NAT port
            "watch_nonce_dscp": nonce,
        }
        return found.mapping, how

    def _make_lane(self, g: AutoGrant, s: Sighting) -> int | None:
        takeover: NatMapping | None = None
        how: dict[str, int] = {}
        if s.src_ip in self._translated and s.src_port is not None:
            if self._laned(s):  # sampled again on its lane: no second pairing, no watch flows
                self.counts["refused_duplicate_lane"] += 1
                return None
            confirmed_mapping = self._takeover(s)
            if confirmed_mapping is None:
                return None
            takeover, how = confirmed_mapping
        detail = {**evidence(s), **how}  # a takeover's record says how its mapping was confirmed
        tag = " ".join(f"{k}={detail[k]}" for k in ("experiment", "activity") if k in detail)
        body = LaneInput(
            src_ip=str(s.src_ip),
            dst_ip=str(s.dst_ip),
            protocol=PROTOCOLS[s.protocol],
            dst_port=s.dst_port,
            duration_s=min(g.policy.max_duration_s, g.max_duration_s),
            purpose=f"automatic ({s.kind}{': ' + tag if tag else ''})"
            + (f", taking over NAT {takeover.address}:{takeover.port}" if takeover else ""),
            src_port=s.src_port,
        )
        caller = Caller(g.principal_id, g.principal, g.role)  # type: ignore[arg-type]
        try:
            lane, _ = self._lanes.request(caller, body, trigger=LaneTrigger(str(s.kind), g.grant_id, detail, takeover))
        except VipError as exc:
            self.counts[f"refused_{exc.code}"] += 1
            log.info("automatic lane for %s refused: %s", body, exc)
            return None
        self.counts["lanes"] += 1
        self.latencies_s = [*self.latencies_s[-999:], self._lane_clock() - s.observed_at]
        log.info("automatic lane %d (%s) for grant %d", lane.id, s.kind, g.grant_id)
        return lane.id

    def _laned(self, s: Sighting) -> bool:
        """A live automatic lane carries exactly this flow already."""
        with self._db.read() as sess:
            return any(store.same_flow(lane, s) for lane in store.live_auto_lanes(sess))

    def _end_flow(self, s: Sighting) -> int | None:
        """A firefly ``end``: the automatic lanes of exactly this flow end (never a requested one)."""
        with self._db.read() as sess:
            lanes = store.live_auto_lanes(sess)
        ended = None
        for lane in lanes:
            if store.same_flow(lane, s):
                try:
                    self._lanes.end(system_caller("firefly-end"), lane.lane_id, "released")
                    self.counts["firefly_ends"] += 1
                    ended = lane.lane_id
                except VipError:
                    pass
        return ended
