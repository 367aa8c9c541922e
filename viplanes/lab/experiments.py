"""The paper's section 4 in the lab: placements x directions x paths x tools x parameters.

The parts live by concern: `sweep.py` plans the runs (`Sweep`, `RunSpec`, `plan`), `session.py`
builds the lab and the service around it (`session`), `runner.py` executes the runs on it and
appends one JSON line per run (`Runner`), `estimate.py` says how long a run takes. This module
keeps the names the command line and the tests import from here.
"""

from __future__ import annotations

from .estimate import NO_LANE, estimate_s, wan_record
from .runner import Runner
from .session import Session, lab_grant_prefixes, session
from .sweep import ALL_TOOLS, DIRECTIONS, PATHS, PLACEMENTS, TOOLS, RunSpec, Sweep, needed_shapes, plan

__all__ = [
    "ALL_TOOLS",
    "DIRECTIONS",
    "NO_LANE",
    "PATHS",
    "PLACEMENTS",
    "TOOLS",
    "RunSpec",
    "Runner",
    "Session",
    "Sweep",
    "estimate_s",
    "lab_grant_prefixes",
    "needed_shapes",
    "plan",
    "session",
    "wan_record",
]
