"""What successive halving's rungs cost, before any is measured: ``tune.search`` sizes
rung 0 and cuts the rungs to the budget with these, so the plan and the search agree
on one arithmetic of windows, points and process overheads.
"""

from __future__ import annotations

import math

FIRST_RUNG_S = 0.3  # rung 0's measured window: enough iterations of a small model to rank


def rung_count(n: int, eta: int) -> int:
    """The rungs after a rung 0 of ``n`` points: until one point is kept."""
    return max(1, math.ceil(math.log(max(n, 2), eta)))


def later_rungs(n: int, overhead: float, eta: int, objectives: int = 1) -> float:
    """Seconds the rungs after a rung 0 of ``n`` points take when halving runs its course."""
    return plan_cost(n, rung_count(n, eta), overhead, eta, objectives)


def plan_cost(n: int, rungs: int, overhead: float, eta: int, objectives: int = 1) -> float:
    """Seconds ``rungs`` rungs after a rung 0 of ``n`` points take, as ``run_search`` runs
    them: rung k keeps 1/eta of the one before, rung 1 adds the combined points (two, as a
    rule), each adds the default, at FIRST_RUNG_S eta^k; the last, at the window before,
    measures its points eta times and the default once, then each objective's best once
    more."""
    total, count, window = 0.0, n, FIRST_RUNG_S
    for k in range(1, rungs + 1):
        points = math.ceil(count / eta) + (2 if k == 1 else 0)
        if k == rungs or points <= 1:
            return total + (eta * points + 1 + objectives) * (overhead + window)
        window *= eta
        total += (points + 1) * (overhead + window)
        count = points + 1
    return total
