"""What this machine is: its CPU, memory and accelerators, probed once per process.

Apart from the fingerprint (which also lists package versions, read from the
backends' declarations) so that the backends can ask "is there a GPU?" without
importing the fingerprint that reads them.
"""

from __future__ import annotations

import functools
import glob
import platform
import shutil
import subprocess
from typing import Any

import psutil

from dlbench.harness.cells.threads import physical_cores


def _cpuinfo() -> dict[str, str]:
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    break  # first processor is enough
                key, _, value = line.partition(":")
                info[key.strip()] = value.strip()
    except OSError:
        pass
    return info


def cpu() -> dict[str, Any]:
    info = _cpuinfo()
    flags = set(info.get("flags", "").split())
    isa = [
        f
        for f in (
            "avx2",
            "avx512f",
            "avx512_vnni",
            "avx512_bf16",
            "amx_tile",
            "amx_bf16",
            "avx_vnni",
            "sve",
            "asimd",
        )
        if f in flags
    ]
    return {
        "model": info.get("model name") or platform.processor() or platform.machine(),
        "architecture": platform.machine(),
        "physical_cores": physical_cores(),
        "logical_cores": psutil.cpu_count() or 1,
        "isa": isa,
    }


# Instructions that compute in half precision (x86: Sapphire Rapids' AVX512-FP16 and AMX-FP16;
# Arm: the FP16 arithmetic extension, "asimdhp").  Not part of cpu(): its ISA list is hashed
# into the machine id, which a new flag must not change.
FP16_ARITHMETIC = ("avx512_fp16", "amx_fp16", "asimdhp")


def fp16_arithmetic() -> list[str]:
    """This CPU's half-precision arithmetic instructions (empty: none, fp16 runs via fp32)."""
    info = _cpuinfo()  # x86 names them "flags", Arm "Features"
    flags = set((info.get("flags") or info.get("Features") or "").split())
    return [f for f in FP16_ARITHMETIC if f in flags]


def command_output(cmd: list[str]) -> str | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def nvidia_gpus() -> list[dict[str, str]]:
    out = command_output(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap", "--format=csv,noheader"]
    )
    gpus = []
    for line in (out or "").strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3:
            gpus.append(
                {
                    "name": parts[0],
                    "driver": parts[1],
                    "memory": parts[2],
                    "compute_capability": parts[3] if len(parts) > 3 else "",
                }
            )
    return gpus


@functools.lru_cache(maxsize=1)
def ascend_npus() -> list[dict[str, str]]:
    nodes = sorted(p for p in glob.glob("/dev/davinci*") if p[-1].isdigit())
    if not nodes:
        return []
    out = command_output(["npu-smi", "info"]) or ""
    name = next((tok for tok in out.split() if tok.startswith(("910", "310"))), "Ascend")
    return [
        {"name": f"Ascend {name}" if not name.startswith("Ascend") else name, "device": node}
        for node in nodes
    ]
