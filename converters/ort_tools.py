"""ONNX Runtime's Python tools (the quantizer's shape inference, symbolic shape inference)
without PyTorch, and with their log lines kept for the record instead of printed.

``onnxruntime/tools/__init__.py`` imports torch whenever torch is installed, for one
helper (``infer_input_info``) that exporting from PyTorch uses.  dlbench never calls it,
yet every process that quantizes a graph or infers symbolic shapes paid a PyTorch import
for it: 1.5 to 3.5 s per ``dlbench build --to int8`` on a 2-core machine, and a framework
in a parent process that must stay framework-free.  A stand-in module under that name,
placed before ``onnxruntime.tools`` is first imported, keeps PyTorch out.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import types
from collections.abc import Iterator
from typing import Any

_HELPERS = "onnxruntime.tools.pytorch_export_helpers"


def without_torch() -> None:
    """Call before the first import of anything under ``onnxruntime.tools`` (or the
    quantizer, which imports it).  Once the package is imported it changes nothing."""
    if "onnxruntime.tools" in sys.modules or _HELPERS in sys.modules:
        return
    stand_in = types.ModuleType(_HELPERS, "dlbench's stand-in: onnxruntime.tools without PyTorch")

    def infer_input_info(*_args, **_kwargs):
        raise RuntimeError(f"{_HELPERS} is dlbench's stand-in (converters/ort_tools.py): not available")

    stand_in.infer_input_info = infer_input_info  # type: ignore[attr-defined]
    sys.modules[_HELPERS] = stand_in


_QUOTED = re.compile(r"'[^']*'")


@contextlib.contextmanager
def kept_log(into: dict[str, Any]) -> Iterator[None]:
    """The quantizer reports through the root logger, one line per tensor: a per-channel
    request it cannot honour (a rank-1 LayerNorm scale) is one "Axis 1 is out-of-range
    for weight 'gamma_12' with rank 1" each, 289 lines on stderr for one generated network,
    with no handler configured to hold them.  Here they are counted by message (names in
    quotes elided) with the first example, for the build's record, and not printed."""
    counts: dict[str, dict[str, Any]] = {}

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            text = record.getMessage()
            kind = counts.setdefault(_QUOTED.sub("'...'", text), {"count": 0, "example": text})
            kind["count"] += 1

    root = logging.getLogger()
    keep = _Keep(logging.WARNING)
    root.addHandler(keep)
    try:
        yield
    finally:
        root.removeHandler(keep)
        into.update({k: v for k, v in sorted(counts.items(), key=lambda kv: -kv[1]["count"])})


def kept_log_note(log: dict[str, dict[str, Any]]) -> str | None:
    """One line for the user about what ``kept_log`` kept (None: nothing was said), so a
    build that silenced 289 warnings still says that there were some, and where they are."""
    if not log:
        return None
    count = sum(kind["count"] for kind in log.values())
    first = next(iter(log.values()))["example"]
    first = first if len(first) <= 120 else first[:117] + "..."
    kinds = f"{len(log)} kinds" if len(log) > 1 else "one kind"
    return (
        f"ONNX Runtime's quantizer logged {count} message{'s' if count > 1 else ''} ({kinds}, "
        f"the most frequent: {first}); all of them are in the record's build_info.quantizer_log"
    )
