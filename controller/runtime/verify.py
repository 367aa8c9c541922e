"""Is each declared link cabled as declared? The verdicts on the probes' sightings. Pure: times are
passed in.

A probe sent out of one end of a link must come back from the switch at its other end, on the
declared port. Per link:

- *verified*: since the link was last armed, a probe was seen in each direction between exactly
  its declared ports (both directions: lanes need the replies too);
- *miscabled*: a probe sent out of one of its ends arrived elsewhere, or one of its ends heard a
  probe from a port other than its declared peer. The reason names the declared and the
  observed ends. It stands while such sightings keep coming (``grace_s`` after the last one);
- *not seen*: armed ``grace_s`` ago and a direction still missing.

A link is armed when both its switches are connected and reconciled (their punt flows are in),
and again when one of its ports comes up (a cable may have moved); arming forgets the sightings.

Start-up: until its first verdict a link is usable. A controller (re)start must not re-route or
refuse lanes while the first probes are in flight; a miscabled link is known at the first probe
that comes back wrong (about one probe interval), a missing one after ``grace_s``. Once judged
unverified, a link stays so until the probes prove it right (re-arming does not clear it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

End = tuple[int, int]  # (dpid, port)


@dataclass
class _Cable:
    ends: tuple[End, End]
    names: tuple[str, str]  # "s2:3" of each end
    armed_at: float | None = None
    seen_from: set[End] = field(default_factory=set)  # senders whose probe arrived right since armed
    wrong: dict[str, float] = field(default_factory=dict)  # what the probes showed instead -> when
    verdict: str = ""  # "" = usable (verified, or not judged yet)


class CablingVerifier:
    """Each declared link's cabling verdict from the probes' sightings."""

    def __init__(self, links: dict[str, tuple[End, End]], names: dict[str, tuple[str, str]], grace_s: float) -> None:
        self.grace_s = grace_s
        self._cables = {name: _Cable(ends, names[name]) for name, ends in links.items()}
        self._by_end: dict[End, str] = {}
        for name, (a, b) in links.items():
            self._by_end[a] = self._by_end[b] = name

    def ends(self) -> list[End]:
        """Every declared link end: where probes are sent."""
        return sorted(self._by_end)

    def links(self) -> dict[str, tuple[End, End]]:
        return {name: c.ends for name, c in self._cables.items()}

    # ---- events -------------------------------------------------------------------------------
    def arm(self, name: str, now: float) -> None:
        """Start (again) waiting for both directions: switches reconciled, or a port came up."""
        c = self._cables[name]
        c.armed_at, c.seen_from, c.wrong = now, set(), {}

    def disarm(self, name: str) -> None:
        """A switch of the link left: no judging until it is back (the verdict stays)."""
        c = self._cables[name]
        c.armed_at, c.seen_from = None, set()

    def armed(self, name: str) -> bool:
        return self._cables[name].armed_at is not None

    def name_of(self, end: End) -> str | None:
        return self._by_end.get(end)

    def heard(self, sender: End, receiver: End, now: float) -> None:
        """A verified probe sent out of ``sender`` was punted by ``receiver``'s switch."""
        sent_on, heard_on = self._by_end.get(sender), self._by_end.get(receiver)
        if sent_on is None or heard_on is None:
            return  # not a declared end: the flows punt probes on declared link ports only
        c = self._cables[sent_on]
        if c.ends != (sender, receiver) and c.ends != (receiver, sender):
            self._wrong(sent_on, sender, receiver, now, sending=True)
            self._wrong(heard_on, receiver, sender, now, sending=False)
            return
        if c.armed_at is not None:
            c.seen_from.add(sender)

    # ---- answers ------------------------------------------------------------------------------
    def judge(self, now: float) -> dict[str, str]:
        """Verdicts that changed since the last call: link name -> reason ("" = usable)."""
        changed = {}
        for name, c in self._cables.items():
            verdict = self._verdict(c, now)
            if verdict != c.verdict:
                c.verdict = verdict
                changed[name] = verdict
        return changed

    def verdicts(self) -> dict[str, str]:
        return {name: c.verdict for name, c in self._cables.items()}

    # ---- internals ----------------------------------------------------------------------------
    def _name(self, end: End) -> str:
        c = self._cables[self._by_end[end]]
        return c.names[c.ends.index(end)]

    def _wrong(self, name: str, end: End, other: End, now: float, sending: bool) -> None:
        c = self._cables[name]
        here, there = self._name(end), self._name(other)
        c.wrong[f"probes from {here} arrive at {there}" if sending else f"{here} hears {there}"] = now
        c.seen_from = set()  # what was seen right before proves nothing about the cabling now

    def _verdict(self, c: _Cable, now: float) -> str:
        # every sighting of the last grace period, sorted: the same cabling gives the same words
        fresh = sorted(text for text, at in c.wrong.items() if now - at <= self.grace_s)
        if fresh:
            return f"miscabled: {'; '.join(fresh)} (declared {c.names[0]} <-> {c.names[1]})"
        if c.armed_at is None:
            return c.verdict
        if len(c.seen_from) == 2:
            return ""
        if now - c.armed_at < self.grace_s:
            return c.verdict
        missing = [f"{c.names[i]} -> {c.names[1 - i]}" for i, end in enumerate(c.ends) if end not in c.seen_from]
        return f"not seen: no probe {' or '.join(missing)} within {self.grace_s:g} s"
