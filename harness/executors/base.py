"""What every executor shares: what a cell asks of its machine, and how a cell is ended."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import Any, Protocol

from dlbench.harness.cells.launcher import CellOutcome


@dataclass(frozen=True)
class Needs:
    """What a cell asks of the machine that runs it: its threads' cores, its device, and
    (for ``--repeats`` after the first) the node the first repeat ran on, so that the
    spread between repeats is never the difference between two machines."""

    cpus: int = 1
    device: str = "cpu"
    node: str | None = None


class Executor(Protocol):
    name: str

    def run(
        self, kind: str, payload: dict[str, Any], *, env: dict[str, str], timeout: float | None, needs: Needs
    ) -> tuple[CellOutcome, dict[str, Any]]:
        """The cell's outcome, and the record context that says where and with what it ran
        (``executor``, ``thread_environment``, ``allocator``)."""

    def interrupt(self) -> None:
        """End the running cell (Ctrl-C); called from another thread than ``run``'s."""


def kill_children() -> None:
    """End the cells this process started: each runs in its own session (``run_cell``),
    which neither Ctrl-C nor a cancelled Ray task reaches."""
    import psutil

    for child in psutil.Process().children():
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
