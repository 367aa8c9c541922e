"""Seed 003's verdicts on made-up records: the seed's order reproduces every row, and each
record set below flips exactly the rows it should (an older lab run's order flips three)."""

from __future__ import annotations

from typing import Any

from viplanes.lab.fidelity import NOT_APPLICABLE, NOT_REPRODUCED, REPRODUCED, Finding
from viplanes.lab.fidelity import seeds as fidelity_seeds
from viplanes.lab.fidelity import tools as fidelity_tools

CLAIMS = ("fastest", "close behind", "a third faster", "far slower", "between")


def rec(tool: str, mbps: float, **kw: Any) -> dict[str, Any]:
    base = {
        "ok": True,
        "tool": tool,
        "placement": "dtn",
        "path": "default",
        "direction": "download",
        "dataset": "one",
        "series": "tools",
        "parallel": 4 if tool in ("rclone", "aria2") else 1,
        "mbps": mbps,
    }
    return base | kw


def runs(**mbps: float) -> list[dict[str, Any]]:
    return [rec("rclone" if t == "s3" else t, v) for t, v in mbps.items()]


def verdicts(records: list[dict[str, Any]]) -> dict[str, str]:
    items = fidelity_tools.findings(records)
    out = {}
    for words in CLAIMS:
        found = [f for f in items if words in f.claim]
        assert len(found) == 1, [f.claim for f in items]
        out[words] = found[0].verdict
    return out


# the seed's numbers, lab scale: scp 75 and rsync 112 (its text); an S3 download of 240, whose
# total with the 30 s/GB in-cloud upload (130) beats rsync; axel between; wget like scp
SEED_ORDER = dict(s3=24, rsync=11.2, aria2=10, scp=7.5, wget=7.5)


def test_the_seeds_order_reproduces_every_row_with_paper_and_lab_numbers() -> None:
    assert set(verdicts(runs(**SEED_ORDER)).values()) == {REPRODUCED}
    items = fidelity_tools.findings(runs(**SEED_ORDER))
    fastest = items[0]
    assert "s3 240" in fastest.lab and "wget 75" in fastest.lab  # scaled back x10
    assert "scp 75" in fastest.paper and "rsync 112" in fastest.paper and "s3 >" in fastest.paper
    assert all(f.source == "003" and f.reason for f in items)


def test_an_older_labs_order_flips_three_rows_each_with_its_reason() -> None:
    # a recorded run (S3 on 4 connections, start-up not taken out): aria2c's 4 connections beat everything
    got = verdicts(runs(s3=26.0, scp=9.5, rsync=10.3, wget=15.4, aria2=48.9))
    assert got == {
        "fastest": NOT_REPRODUCED,
        "close behind": REPRODUCED,  # 103 against S3's total, 136
        "a third faster": NOT_REPRODUCED,
        "far slower": REPRODUCED,
        "between": NOT_REPRODUCED,
    }
    why = {
        f.claim: f.reason for f in fidelity_tools.findings(runs(s3=26.0, scp=9.5, rsync=10.3, wget=15.4, aria2=48.9))
    }
    assert any("aria2 beat S3" in r for r in why.values())
    assert any("rsync at 76% of S3's total" in r for r in why.values())
    close = next(f for f in fidelity_tools.findings(runs(s3=26.0, rsync=10.3)) if "close behind" in f.claim)
    assert close.lab == "s3 total 136, rsync 103" and close.paper == "s3 total >112, rsync 112"


def flip(**change: float) -> dict[str, str]:
    return verdicts(runs(**(SEED_ORDER | change)))


def test_each_row_flips_on_its_own() -> None:
    assert flip(aria2=30)["fastest"] == NOT_REPRODUCED  # aria2c beats S3 by 1.25x
    # a fast S3 download makes its total the in-cloud upload's: rsync at 53% of 211, and only that row
    assert [k for k, v in flip(s3=80).items() if v == NOT_REPRODUCED] == ["close behind"]
    assert flip(scp=10.5)["a third faster"] == NOT_REPRODUCED  # rsync only 1.07x scp
    assert flip(wget=18)["far slower"] == NOT_REPRODUCED  # wget at 75% of S3
    assert flip(aria2=8.5)["between"] == NOT_REPRODUCED  # no faster than one connection by a fifth
    assert flip(aria2=12)["between"] == NOT_REPRODUCED  # above rsync
    # and only that row, where the claims are independent: aria2c above rsync breaks the order only
    assert [k for k, v in flip(aria2=12).items() if v == NOT_REPRODUCED] == ["between"]
    # an scp as fast as rsync leaves no room for aria2c between them: the two rows fall together
    assert [k for k, v in flip(scp=10.5).items() if v == NOT_REPRODUCED] == ["a third faster", "between"]


def test_the_rate_less_start_up_is_used_when_the_run_measured_it() -> None:
    """A tools run records its wall-clock ``mbps`` and ``x_mbps_net`` (start-up taken out)."""
    records = runs(**SEED_ORDER)
    for r in records:
        if r["tool"] == "scp":
            r["mbps"], r["x_mbps_net"] = 3.0, 7.5  # ssh's handshake was most of the wall time
    assert set(verdicts(records).values()) == {REPRODUCED}
    assert fidelity_tools.tool_means(records)["scp"] == 75.0


def test_failed_runs_other_series_and_missing_tools_are_not_counted() -> None:
    records = runs(**SEED_ORDER)
    records.append(rec("aria2", 500.0, ok=False))  # failed: no throughput to speak of
    records.append(rec("rclone", 500.0, series="transfers", dataset="split50"))  # another sweep
    assert set(verdicts(records).values()) == {REPRODUCED}
    no_rsync = [r for r in records if r["tool"] != "rsync"]
    got = verdicts(no_rsync)
    assert got["close behind"] == got["a third faster"] == got["between"] == NOT_APPLICABLE
    assert got["far slower"] == REPRODUCED
    only_wget = [r for r in runs(**SEED_ORDER) if r["tool"] != "scp"]  # scp/wget: either is enough
    assert verdicts(only_wget)["far slower"] == REPRODUCED


def test_results_without_series_use_the_one_file_downloads() -> None:
    records = [{k: v for k, v in r.items() if k != "series"} for r in runs(**SEED_ORDER)]
    records.append(rec("rclone", 500.0, dataset="split50", series=None))  # a transfers run: not seed 003's
    records.append(rec("iperf3", 500.0, dataset=None, series=None))
    assert set(verdicts(records).values()) == {REPRODUCED}


def test_no_runs_still_gives_every_claim_a_row_saying_why() -> None:
    items: list[Finding] = fidelity_seeds.findings([])
    tools = [f for f in items if f.source == "003"]
    assert len(tools) == len(CLAIMS)
    assert all(f.verdict == NOT_APPLICABLE and f.reason.startswith("not measured") for f in tools)
