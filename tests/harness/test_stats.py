import math

import pytest

from dlbench.harness import stats


def test_percentiles_match_hand_computation():
    xs = [10, 1, 4, 3, 2]  # sorted: 1 2 3 4 10
    assert stats.percentile(xs, 50) == 3
    assert stats.percentile(xs, 0) == 1
    assert stats.percentile(xs, 100) == 10
    # rank (5-1)*0.9 = 3.6 -> 4 + 0.6 * (10 - 4)
    assert stats.percentile(xs, 90) == pytest.approx(7.6)
    assert stats.percentile(xs, 25) == 2


def test_summary_fields():
    s = stats.summarize([1.0, 2.0, 3.0, 4.0])
    assert s["mean"] == 2.5
    assert s["std"] == pytest.approx(math.sqrt(5 / 3))  # sample std, n-1
    assert s["cv"] == pytest.approx(math.sqrt(5 / 3) / 2.5)
    assert s["p50"] == 2.5 and s["min"] == 1.0 and s["max"] == 4.0
    assert s["iqr"] == pytest.approx(3.25 - 1.75)


def test_single_sample_and_errors():
    assert stats.summarize([5.0])["std"] == 0.0
    with pytest.raises(ValueError):
        stats.summarize([])
    with pytest.raises(ValueError):
        stats.percentile([1], 101)


# --- stability: robust statistics, two rules ------------------------------------------------


def test_one_slow_iteration_in_ten_trips_the_cv_but_not_the_iqr_rule():
    """The reason the rule is on IQR / median: a single page fault is not instability."""
    xs = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 10.0]
    s = stats.summarize(xs)
    assert s["cv"] > 1.0  # the old rule: "unstable"
    verdict = stats.stability(s["iqr_over_median"])
    assert s["iqr_over_median"] < 0.05 and not verdict["unstable"] and verdict["rule"] is None
    # Latencies spread across the board are unstable, and the record says by which rule.
    wide = stats.summarize([1.0, 1.3, 0.8, 1.25, 0.7, 1.4, 0.9, 1.1, 0.75, 1.35])
    verdict = stats.stability(wide["iqr_over_median"])
    assert verdict["unstable"] and verdict["rule"] == "within_process"
    assert verdict["within_process"] == wide["iqr_over_median"]
    assert verdict["threshold"] == {
        "within_process": stats.WITHIN_PROCESS_THRESHOLD,
        "between_processes": stats.BETWEEN_PROCESSES_THRESHOLD,
    }
    assert "IQR/median" in stats.describe_stability(verdict)


def test_processes_that_disagree_are_flagged_between_processes():
    # Three quiet processes, one 12 % slower than the others: the MAD of three misses it
    # (the median deviation is that of the closer two), the range over the median does not.
    procs = [1000.0, 1004.0, 880.0]
    assert stats.relative_mad(procs) < 0.01
    assert stats.range_over_median(procs) == pytest.approx(124 / 1000)
    verdict = stats.stability(0.02, procs)
    assert verdict["unstable"] and verdict["rule"] == "between_processes"
    assert verdict["between_processes"] == pytest.approx(0.124) and verdict["processes"] == 3
    assert "3 processes" in stats.describe_stability(verdict)
    # Both rules at once; agreeing processes pass; one process cannot disagree with itself.
    assert stats.stability(0.3, procs)["rule"] == "both"
    assert not stats.stability(0.02, [1000.0, 1010.0, 995.0])["unstable"]
    assert stats.stability(0.02, [1000.0])["between_processes"] is None
    # The thresholds are the caller's.
    assert not stats.stability(0.3, procs, within_threshold=0.5, between_threshold=0.2)["unstable"]


def test_percentile_support_per_percentile():
    assert stats.min_samples_for(50) == 10 and stats.min_samples_for(90) == 66
    assert stats.min_samples_for(99) == 688
    assert stats.percentile_support(66) == {"p50": True, "p90": True, "p95": False, "p99": False}
    assert stats.percentile_support(9) == dict.fromkeys(("p50", "p90", "p95", "p99"), False)
