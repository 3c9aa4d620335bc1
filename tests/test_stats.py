import math

import pytest

from dlbench.harness import stats


def test_percentiles_match_hand_computation():
    xs = [10, 1, 4, 3, 2]             # sorted: 1 2 3 4 10
    assert stats.percentile(xs, 50) == 3
    assert stats.percentile(xs, 0) == 1
    assert stats.percentile(xs, 100) == 10
    # rank (5-1)*0.9 = 3.6 -> 4 + 0.6 * (10 - 4)
    assert stats.percentile(xs, 90) == pytest.approx(7.6)
    assert stats.percentile(xs, 25) == 2


def test_summary_fields():
    s = stats.summarize([1.0, 2.0, 3.0, 4.0])
    assert s["mean"] == 2.5
    assert s["std"] == pytest.approx(math.sqrt(5 / 3))     # sample std, n-1
    assert s["cv"] == pytest.approx(math.sqrt(5 / 3) / 2.5)
    assert s["p50"] == 2.5 and s["min"] == 1.0 and s["max"] == 4.0
    assert s["iqr"] == pytest.approx(3.25 - 1.75)


def test_single_sample_and_errors():
    assert stats.summarize([5.0])["std"] == 0.0
    with pytest.raises(ValueError):
        stats.summarize([])
    with pytest.raises(ValueError):
        stats.percentile([1], 101)
