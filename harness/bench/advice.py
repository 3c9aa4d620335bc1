"""The precision advisor's plan-time lines: what a cell's figure will not show by itself.

A user who benches an fp16 model on a CPU without half-precision arithmetic sees it run
slower than fp32 (0.60x for ResNet-class ONNX Runtime on this project's AMD EPYC VMs) and
reasonably suspects the build.  The engines convert to float32 around every op there, so
the line says so before the numbers do, and it stays in each such record's notes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dlbench.harness.machine.hardware import FP16_ARITHMETIC, cpu, fp16_arithmetic


def fp16_on_this_cpu() -> str | None:
    """The line for fp16 cells on this CPU, or None where it computes in fp16."""
    if fp16_arithmetic():
        return None
    return (
        f"fp16 on this CPU ({cpu()['model']}): it has no half-precision arithmetic (none of "
        f"{', '.join(FP16_ARITHMETIC)}), so the engine converts to float32 around each op and "
        "fp16 is expected slower than fp32 here; fp16 pays on GPUs and fp16-capable CPUs, "
        "bf16 or int8 on this one"
    )


def advise(cells: Sequence[Any]) -> list[str]:
    """Add each applicable line to its cells' notes; return the lines for the sweep."""
    lines = []
    fp16_cpu = [c for c in cells if c.device == "cpu" and c.precision == "fp16"]
    line = fp16_on_this_cpu() if fp16_cpu else None
    if line:
        lines.append(line)
        for c in fp16_cpu:
            c.notes.append(line)
    return lines
