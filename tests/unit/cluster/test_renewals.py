"""The lease holder's renewal record (``viplanes.cluster.renewals``): the numbers the lease timing
is argued from, and the lines the failover soak reads back."""

from __future__ import annotations

from viplanes.cluster.renewals import RenewalStats, parse_summaries, quantile


def test_a_summary_every_n_renewals_names_the_worst_gap_and_the_least_slack() -> None:
    stats = RenewalStats(every=4)
    assert stats.renewed(10.0, 10.01, 0.0) is None  # the gain: no gap yet
    lines = [stats.renewed(10.0 + 0.3 * n, 10.0 + 0.3 * n + 0.01, 10.0 + 0.3 * (n - 1) + 1.5) for n in (1, 2, 3)]
    assert lines == [None, None, None]
    # a renewal 0.9 s late: its answer came 0.3 s before the previous deadline
    line = stats.renewed(11.8, 11.81, 10.9 + 1.5 - 1.1 + 0.8)
    assert line == "renewals: gap p50 300 ms, p99 900 ms, max 900 ms; slack min 290 ms over 4"
    assert stats.gaps == [] and stats.slacks == []  # a fresh window


def test_a_loss_starts_the_gaps_over() -> None:
    stats = RenewalStats(every=2)
    stats.renewed(1.0, 1.01, 0.0)
    stats.lost()
    assert stats.renewed(50.0, 50.01, 2.5) is None  # not a 49 s gap
    assert stats.gaps == []


def test_the_soak_reads_the_worst_of_every_summary() -> None:
    text = (
        "x INFO lease controller: renewals: gap p50 300 ms, p99 340 ms, max 420 ms; slack min 1080 ms over 200\n"
        "junk\n"
        "y INFO lease controller: renewals: gap p50 301 ms, p99 520 ms, max 610 ms; slack min 890 ms over 200\n"
    )
    assert parse_summaries(text) == {
        "renewal_gap_p99_ms_max": 520.0,
        "renewal_gap_max_ms": 610.0,
        "renewal_slack_min_ms": 890.0,
        "renewals": 400.0,
    }
    assert parse_summaries("nothing") == {}


def test_quantile_is_nearest_rank() -> None:
    assert quantile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert quantile([1.0, 2.0], 0.99) == 2.0
