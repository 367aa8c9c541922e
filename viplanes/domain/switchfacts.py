"""What a switch said or showed about itself, as opposed to what the topology declares about it
(docs/hardware.md): the controller learns these facts, the lane service's budget and the console
read them through the data-plane seam (``Dataplane.switch_facts``). Pure and stdlib-only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SwitchFacts:
    """``tables``/``max_entries``/``max_meters``: the switch's own answer to OFPMP_TABLE_FEATURES
    and OFPMP_METER_FEATURES (None: not asked or not answered). ``full_at``: how many of our
    entries it held when it last refused one for a full table (OFPFMFC_TABLE_FULL), the most it
    is known to hold for us; the budget never counts on more."""

    tables: int | None = None
    max_entries: Mapping[int, int] = field(default_factory=dict)  # table id -> max_entries
    max_meters: int | None = None
    full_at: int | None = None


def effective_max(declared: int | None, facts: SwitchFacts | None) -> int | None:
    """The total the budget counts against: the declared ``max_flows`` total, lowered to what the
    switch held when it said it was full (None: no limit known)."""
    learned = facts.full_at if facts is not None else None
    if learned is None:
        return declared
    return learned if declared is None else min(declared, learned)


def learned_features(facts: SwitchFacts) -> dict[str, bool]:
    """The capability names (topologies/profiles.py) the switch's own answers settle: more than
    one table is ``multi_table``, any meter is ``meters``. A fact not asked or not answered says
    nothing, so it is left out rather than read as False."""
    out: dict[str, bool] = {}
    if facts.tables is not None:
        out["multi_table"] = facts.tables > 1
    if facts.max_meters is not None:
        out["meters"] = facts.max_meters > 0
    return out
