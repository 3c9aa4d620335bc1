"""``dlbench env``'s hints: a default that the tunes on this machine keep beating.

dlbench never changes a default by itself (the numbers of every earlier record would
change meaning); it says so instead, once the evidence is more than one model: a default
that loses to another documented value of the same setting by more than ``LOSS`` on most
models tuned here (their one-factor points: that setting alone changed, all else default).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from dlbench.harness.tune.headroom import tune_records
from dlbench.harness.tune.space import NOT_DEFAULTS

LOSS = 0.05


def default_hints(store: Any, machine_id: str) -> list[str]:
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for r in tune_records(store, "machine_id = ?", (machine_id,)):
        latest[(r["model"], r["backend"])] = r  # newest per model and backend
    tried: dict[tuple[str, str], set[str]] = {}
    won: dict[tuple[str, str], Counter] = {}
    for (model, backend), r in latest.items():
        m = r.get("metrics") or {}
        for setting, by_value in (m.get("one_factor") or {}).items():
            if setting in NOT_DEFAULTS:
                continue
            tried.setdefault((backend, setting), set()).add(model)
            value, ratio = max(by_value.items(), key=lambda vr: vr[1])
            if ratio > 1 + LOSS:
                won.setdefault((backend, setting), Counter())[value] += 1
    hints = []
    for (backend, setting), models in sorted(tried.items()):
        wins = won.get((backend, setting), Counter())
        if len(models) < 2 or sum(wins.values()) * 2 <= len(models):
            continue
        value = wins.most_common(1)[0][0]
        default = next(
            (r["metrics"]["defaults"].get(setting) for (_, b), r in latest.items() if b == backend), "?"
        )
        hints.append(
            f"hint: {backend}'s default {setting}={default} lost by more than {LOSS:.0%} on "
            f"{sum(wins.values())} of {len(models)} models tuned on this machine (most often to "
            f"{setting}={value}); dlbench keeps its defaults: set it where it pays (dlbench tune's configs)"
        )
    return hints
