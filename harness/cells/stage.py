"""What a cell is doing, kept where its parent can read it after the cell is gone.

A cell that raises reports its own error; one that dies in native code (a segfault in an
engine's compiler), is killed for memory or hangs into its timeout says nothing, and "crashed
with SIGSEGV" alone leaves a user nowhere.  So a cell names each step before it takes it, and
a step that has a known way round, such as a setting that avoids the code that crashed, names
that too: the parent's failure line ends "while compiling the model in OpenVINO's CPU plugin
(shapes: static input=1x3x64x64); -O reshape=off compiles it with its dynamic dimensions".

The step is one small file beside the cell's reply, replaced whole at each step; nothing is
written while a cell is timed (steps are entered between phases, never inside the loop).
Outside a cell (a runner used in-process) there is no file and entering a step does nothing.
"""

from __future__ import annotations

import json
import os

SUFFIX = ".stage"
_path: str | None = None


def keep_at(reply_path: str) -> None:
    """Steps of this process go beside ``reply_path`` (the child's OUT.json)."""
    global _path
    _path = reply_path + SUFFIX


def enter(doing: str, hint: str | None = None) -> None:
    """``doing`` as "while <doing>" reads; ``hint`` what a user could change if it fails."""
    if _path is None:
        return
    tmp = _path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"doing": doing, "hint": hint}, fh)
    os.replace(tmp, _path)


def clear() -> None:
    """No step yet: a process running several cells in turn starts each without the step
    the one before it ended on, which a crash would otherwise be blamed on."""
    if _path is not None and os.path.exists(_path):
        os.remove(_path)


def last_words(reply_path: str) -> str:
    """The tail of the failure line of a cell that ended without a reply: ``while <step>``
    and the step's hint, after a space; "" when it named no step."""
    try:
        with open(reply_path + SUFFIX, encoding="utf-8") as fh:
            step = json.load(fh)
    except (OSError, ValueError):
        return ""
    if not isinstance(step, dict) or not step.get("doing"):
        return ""
    return f" while {step['doing']}" + (f"; {step['hint']}" if step.get("hint") else "")
