"""A meeting point for the weight-transfer children (one process per framework, side by side).

Each child exports its own weights, then imports the other frameworks' into the networks
it already built.  Before, a separate process per framework and role did each half: six
framework imports and every network built twice, where starting a framework and building
its networks cost more than computing their logits (the 12-model transfer's fixture took
98 s on a busy 2-core machine).  A child that fails says so here, so its peers stop waiting
and fail at once instead of at the deadline.  Imports nothing heavy: the children load it
before their framework.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from dlbench.core.frameworks import NAMES

T = TypeVar("T")
DEADLINE_S = 600.0


def _marker(directory: Path, framework: str, state: str) -> Path:
    return directory / f".{state}.{framework}"


def export_then_import(
    directory: Path, framework: str, export: Callable[[], T], imports: Callable[[T], None]
) -> None:
    """``export()``, then, once every framework's export is on disk, ``imports(what export
    returned)``.  Raises SystemExit naming the peer whose export failed or never came."""
    try:
        state = export()
    except BaseException:
        _marker(directory, framework, "failed").touch()
        raise
    _marker(directory, framework, "exported").touch()
    deadline = time.monotonic() + DEADLINE_S
    while True:
        failed = [fw for fw in NAMES if _marker(directory, fw, "failed").exists()]
        if failed:
            raise SystemExit(f"{framework}: not importing, the export failed in {', '.join(failed)}")
        if all(_marker(directory, fw, "exported").exists() for fw in NAMES):
            break
        if time.monotonic() > deadline:
            missing = [fw for fw in NAMES if not _marker(directory, fw, "exported").exists()]
            raise SystemExit(f"{framework}: no export from {', '.join(missing)} in {DEADLINE_S:.0f} s")
        time.sleep(0.1)
    imports(state)
