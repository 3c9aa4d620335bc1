"""Progress on stderr for every long command: units done, the current one, elapsed time, ETA.

A *unit* is what a command finishes one at a time: a training run, an export,
a build, a benchmark cell.  The ETA is the mean time of the finished units of
each kind times the units of that kind still to go (a kind with none finished
yet borrows the mean of all finished units; before any unit finished the ETA
is unknown): crude, but honest about what it knows.

On a terminal a rich progress display is redrawn in place (once a second: the
parent must not take CPU from the cell it measures) and each finished unit
leaves a line above it; elsewhere (CI logs, tests) only the finished units'
lines are printed, so logs stay readable.  ``enabled=False`` (``--quiet``)
prints nothing.

One ``dlbench run`` is one display: while a run holds its tracker
(``Progress.activate``, or ``with``), the commands it calls add their units to it
(``open_progress``) instead of drawing their own.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

_ACTIVE: list[Progress] = []


def read_progress(path: str) -> dict[str, Any]:
    """The cell's latest progress file (JSON the child replaces atomically); {} if none yet."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def clock(seconds: float) -> str:
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


class Progress:
    def __init__(
        self,
        total: int = 0,
        stream: TextIO | None = None,
        enabled: bool = True,
        kind: str = "cell",
        console: Any = None,
    ):
        self.stream = stream or (console.file if console is not None else sys.stderr)
        self.enabled = enabled
        self.tty = enabled and (
            console.is_terminal
            if console is not None
            else hasattr(self.stream, "isatty") and self.stream.isatty()
        )
        self._console = console
        self.expected: dict[str, int] = {}
        self.finished: dict[str, list[float]] = {}
        self.t0 = time.monotonic()
        self.label, self.kind, self._unit_t0 = "", kind, self.t0
        self._rich = self._task = None
        self.owned = True  # closes itself after its last unit
        if total:
            self.expect(total, kind)

    # -- counting ------------------------------------------------------------------------
    @property
    def total(self) -> int:
        return sum(self.expected.values())

    @property
    def done(self) -> int:
        return sum(len(v) for v in self.finished.values())

    def expect(self, n: int, kind: str) -> Progress:
        """``n`` more units of ``kind`` to come."""
        self.expected[kind] = self.expected.get(kind, 0) + n
        self._refresh()
        return self

    def settle(self, kind: str, n: int) -> Progress:
        """Exactly ``n`` units of ``kind`` still to come (replaces an earlier guess)."""
        self.expected[kind] = len(self.finished.get(kind, [])) + n
        self._refresh()
        return self

    def skip(self, kind: str) -> None:
        """One expected unit of ``kind`` will not run here (finished earlier)."""
        if self.expected.get(kind, 0) > len(self.finished.get(kind, [])):
            self.expected[kind] -= 1
        self._refresh()

    def eta_s(self) -> float | None:
        every = [t for times in self.finished.values() for t in times]
        if not every:
            return None
        overall = sum(every) / len(every)
        left = 0.0
        for kind, n in self.expected.items():
            times = self.finished.get(kind, [])
            mean = sum(times) / len(times) if times else overall
            left += max(0, n - len(times)) * mean
        if self.label:  # the unit under way has already used some
            times = self.finished.get(self.kind) or every
            left -= min(time.monotonic() - self._unit_t0, sum(times) / len(times))
        return max(0.0, left)

    def eta(self) -> str:
        left = self.eta_s()
        return "ETA unknown" if left is None else f"ETA {clock(left)}"

    def elapsed(self) -> str:
        return f"elapsed {clock(time.monotonic() - self.t0)}"

    # -- the unit under way ------------------------------------------------------------
    def start(self, label: str, kind: str | None = None) -> None:
        self.label, self.kind = label, kind or self.kind
        self._unit_t0 = time.monotonic()
        self._draw(f"{label}: starting")

    def update(self, state: dict[str, Any]) -> None:
        """The child's latest state (a bench cell's progress file)."""
        if not (self.tty and state):
            return
        text = f"{self.label}: {state.get('phase', '')}"
        if state.get("iterations"):
            text += f", {state['iterations']} it"
        if state.get("throughput_sps"):
            text += f", {state['throughput_sps']:.4g} samples/s"
        self._draw(text)

    def finish(self, summary: str) -> None:
        self.finished.setdefault(self.kind, []).append(time.monotonic() - self._unit_t0)
        self.expected[self.kind] = max(self.expected.get(self.kind, 0), len(self.finished[self.kind]))
        line = f"[{self.done}/{self.total}] {self.label}: {summary} ({self.elapsed()}, {self.eta()})"
        self.label = ""
        self.note(line)
        self._draw("")
        if self.owned and self.done >= self.total:
            self.close()

    def abandon(self) -> None:
        """The unit ended in an error the caller reports: leave that line alone on screen."""
        self.label = ""
        self.close()

    def note(self, text: str) -> None:
        if not self.enabled:
            return
        if self._rich is not None:
            self._rich.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            print(text, file=self.stream, flush=True)

    # -- the display -------------------------------------------------------------------
    def _draw(self, text: str) -> None:
        if not self.tty:
            return
        if self._rich is None:
            self._open()
        self._rich.update(
            self._task,
            description=text or self.label or "",
            completed=self.done,
            total=max(self.total, 1),
            eta=self.eta(),
        )

    def _refresh(self) -> None:
        if self._rich is not None:
            self._rich.update(self._task, completed=self.done, total=max(self.total, 1), eta=self.eta())

    def _open(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        console = self._console or Console(file=self.stream, stderr=self.stream is sys.stderr)
        self._rich = RichProgress(
            SpinnerColumn(),
            BarColumn(bar_width=20),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}"),
            TextColumn("{task.description}"),
            console=console,
            refresh_per_second=1,
            transient=True,
        )
        self._rich.start()
        self._task = self._rich.add_task(
            self.label, total=max(self.total, 1), completed=self.done, eta=self.eta()
        )

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()
            self._rich = self._task = None

    # -- one display for a whole run ---------------------------------------------------
    def activate(self) -> Progress:
        """Make this the tracker the commands a run calls add their units to."""
        self.owned = False
        _ACTIVE.append(self)
        return self

    def deactivate(self) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        self.close()

    def __enter__(self) -> Progress:
        return self.activate()

    def __exit__(self, *exc) -> None:
        self.deactivate()


def open_progress(n: int, kind: str, enabled: bool = True) -> Progress:
    """The tracker for ``n`` units of ``kind``: the run's, when a run is under way."""
    if _ACTIVE:
        run = _ACTIVE[-1].settle(kind, n)
        run.kind = kind  # the kind its start() calls mean
        return run
    return Progress(n, enabled=enabled, kind=kind)


def open_sweep(
    n_cells: int, done: int, notes: list[str], kind: str, store_path: Any, enabled: bool = True
) -> Progress:
    """A sweep's tracker for the cells it will run, with the plan's notes and what a
    resume skipped said first (bench and micro say them alike)."""
    bar = open_progress(n_cells - done, kind, enabled=enabled)
    for n in notes:
        bar.note(f"note: {n}")
    if done:
        bar.note(f"resuming: {done} of {n_cells} cells already in {store_path}, skipped")
    return bar


def with_progress(args: Any, label: str, kind: str, work: Any) -> Any:
    """Run ``work(say)`` as one unit on a display of its own (elapsed time on a terminal,
    one line when done); ``say`` prints the command's own lines; ``--quiet``: nothing."""
    bar = Progress(1, enabled=not getattr(args, "quiet", False), kind=kind)
    bar.start(label)
    try:
        result = work(bar.note)
    except BaseException:
        bar.abandon()
        raise
    records = result if isinstance(result, list) else [result]
    failed = sum(1 for r in records if r.get("status") != "ok")
    bar.finish(f"{len(records) - failed} of {len(records)} ok" if failed else "ok")
    return result
