"""The sweep's progress on stderr: cells done, the current cell, its running throughput.

On a terminal one line is redrawn in place; otherwise (CI logs, tests) one
line is printed per finished cell, so logs stay readable.  A cell that ends
in a refusal (bad input found in the cell) clears its line, so the error is
the only line left.
"""
from __future__ import annotations

import json
import sys
from typing import Any, TextIO


def read_progress(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool = True):
        self.total, self.done = total, 0
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.label = ""
        self._width = 0

    def _bar(self) -> str:
        width = 20
        filled = int(width * self.done / self.total) if self.total else width
        return f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}"

    def _draw(self, text: str) -> None:
        line = f"{self._bar()} {text}"
        pad = max(0, self._width - len(line))
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()
        self._width = len(line)

    def start(self, label: str) -> None:
        self.label = label
        if not self.enabled:
            return
        if self.tty:
            self._draw(f"{label}: starting")

    def update(self, state: dict[str, Any]) -> None:
        if not (self.enabled and self.tty and state):
            return
        text = f"{self.label}: {state.get('phase', '')}"
        if state.get("iterations"):
            text += f", {state['iterations']} it"
        if state.get("throughput_sps"):
            text += f", {state['throughput_sps']:.4g} samples/s"
        self._draw(text)

    def finish(self, summary: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self.tty:
            self._draw(f"{self.label}: {summary}")
            self.stream.write("\n")
            self._width = 0
        else:
            print(f"[{self.done}/{self.total}] {self.label}: {summary}", file=self.stream,
                  flush=True)

    def abandon(self) -> None:
        """Clear the current cell's line (the caller reports why)."""
        if self.enabled and self.tty:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def note(self, text: str) -> None:
        if self.enabled:
            print(text, file=self.stream, flush=True)
