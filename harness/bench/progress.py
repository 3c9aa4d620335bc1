"""The old import path of the progress display, kept for callers written against it:
``harness.progress`` serves every long command now, not only the bench sweep."""

from __future__ import annotations

from dlbench.harness.progress import Progress, open_progress, read_progress

__all__ = ["Progress", "open_progress", "read_progress"]
