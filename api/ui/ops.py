"""Switches and drift: what the controller in this process sees on the wire (operators)."""

from __future__ import annotations

from flask import render_template, request
from flask.typing import ResponseReturnValue

from viplanes.store import records as store
from viplanes.topologies.capfacts import fact_rows

from .switchview import inspector
from .web import bp, ctx, operator_only


@bp.route("/switches", endpoint="switches")
def switches_page() -> ResponseReturnValue:
    operator_only()
    insp = inspector()
    c = ctx()
    budgets = c.manager.flow_budgets()  # per switch: max_flows (lowered by a table-full), entries in use
    facts = fact_rows(c.topology, c.dataplane.switch_facts())  # what the switches said about themselves
    links = c.dataplane.readiness().get("links", [])  # each declared link's live state (issue 42)
    return render_template(
        "ui/switches.html", switches=insp.switches() if insp else None, budgets=budgets, facts=facts, links=links
    )


@bp.route("/drift", methods=["GET", "POST"], endpoint="drift")
def drift_page() -> ResponseReturnValue:
    """GET compares switches with the database; POST ("reconcile now") runs the controller's
    reconcile on every connected switch and shows the result and the drift after it."""
    who = operator_only()
    insp = inspector()
    done = None
    if request.method == "POST" and insp is not None:
        done = insp.reconcile_now()
        c = ctx()
        with c.db.write() as s:
            store.audit(s, c.clock(), who.name, "switch.reconcile", "switches", "done", "; ".join(done)[:2000])
    return render_template("ui/drift.html", report=insp.drift() if insp else None, done=done)
