"""Scenarios: how queries reach the backend.  One module each behind ``base.Scenario``.

Adding a scenario is adding a module and its name to ``SCENARIOS``.
"""

from __future__ import annotations

import importlib

from dlbench.core.errors import UserError
from dlbench.harness.bench.scenarios.base import Scenario, ScenarioContext

__all__ = ["SCENARIOS", "Scenario", "ScenarioContext", "get_scenario"]
SCENARIOS = ("offline", "single-stream", "server")


def get_scenario(name: str) -> Scenario:
    if name not in SCENARIOS:
        raise UserError(f"unknown scenario {name!r}; choose from: {', '.join(SCENARIOS)}")
    return importlib.import_module(f"dlbench.harness.bench.scenarios.{name.replace('-', '_')}").SCENARIO
