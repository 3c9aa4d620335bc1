"""``--executor local`` (the default): the cell as a child process of this one."""

from __future__ import annotations

import platform

from dlbench.harness.cells.cellenv import context
from dlbench.harness.cells.launcher import run_cell
from dlbench.harness.executors.base import kill_children


class Local:
    name = "local"

    def run(self, kind, payload, *, env, timeout, needs):
        outcome = run_cell(kind, payload, env=env, timeout=timeout)
        return outcome, {
            "executor": {"name": self.name, "node": {"hostname": platform.node()}},
            **context(env),
        }

    def interrupt(self) -> None:
        kill_children()
