"""`dlbench compare`: is the candidate faster than the baseline, beyond the noise?

``compare(baseline_records, candidate_records, axes=...)`` pairs the cells of two
record sets and judges each pair with ``bootstrap_ratio`` on per-iteration
throughput samples; the command is a thin layer over it.
"""

from dlbench.harness.compare.pairs import Comparison, Pair, compare, judge
from dlbench.harness.compare.stats import RatioEstimate, bootstrap_ratio

__all__ = ["Comparison", "Pair", "RatioEstimate", "bootstrap_ratio", "compare", "judge"]
