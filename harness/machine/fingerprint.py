"""The machine a number was measured on.

Collected without importing any framework: the CPU from /proc/cpuinfo and
psutil, NVIDIA GPUs from nvidia-smi, Ascend NPUs from npu-smi or the davinci
device nodes, versions from package metadata.  ``machine_id`` hashes only the
hardware and OS fields, so the same machine keeps its id across library
upgrades while results from different hardware never share one.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

from dlbench.harness.cells.threads import physical_cores
from dlbench.harness.machine import lock
from dlbench.harness.machine.frameworks import FRAMEWORKS, OTHER_PACKAGES, distribution_version


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


def _run(cmd: list[str]) -> str | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def nvidia_gpus() -> list[dict[str, str]]:
    out = _run(
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


def ascend_npus() -> list[dict[str, str]]:
    nodes = sorted(p for p in glob.glob("/dev/davinci*") if p[-1].isdigit())
    if not nodes:
        return []
    out = _run(["npu-smi", "info"]) or ""
    name = next((tok for tok in out.split() if tok.startswith(("910", "310"))), "Ascend")
    return [
        {"name": f"Ascend {name}" if not name.startswith("Ascend") else name, "device": node}
        for node in nodes
    ]


def versions() -> dict[str, str]:
    names = [fw.distribution for fw in FRAMEWORKS.values()] + list(OTHER_PACKAGES)
    found = {name: distribution_version(name) for name in names}
    return {k: v for k, v in found.items() if v}


def _git_commit() -> str | None:
    # realpath: imported through the dlbench/ links, __file__ is dlbench/harness/...; the
    # checkout is the folder above the real harness/.
    here = str(Path(os.path.realpath(__file__)).parents[2])  # harness/machine/ -> checkout
    if not os.path.isdir(os.path.join(here, ".git")):
        return None
    out = _run(["git", "-C", here, "rev-parse", "--short=12", "HEAD"])
    return out.strip() if out else None


@functools.lru_cache(maxsize=1)
def fingerprint() -> dict[str, Any]:
    from dlbench.core.version import __version__

    mem = psutil.virtual_memory().total
    fp: dict[str, Any] = {
        "hostname": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": cpu(),
        "memory_gib": round(mem / 2**30, 1),
        "gpus": nvidia_gpus(),
        "ascend": ascend_npus(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "versions": versions(),
        "lock_drift": lock.drift(),
        "dlbench": __version__,
        "git_commit": _git_commit(),
    }
    fp["machine_id"] = machine_id(fp)
    return fp


def machine_id(fp: dict[str, Any]) -> str:
    hardware = {
        "os": fp["os"].split(" ")[0],
        "cpu": fp["cpu"],
        "memory_gib": fp["memory_gib"],
        "gpus": [g["name"] for g in fp["gpus"]],
        "ascend": [a["name"] for a in fp["ascend"]],
    }
    blob = json.dumps(hardware, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def resource_label(fp: dict[str, Any], device: str) -> str:
    """The seeds' "Resource" column: what the number ran on."""
    c = fp["cpu"]
    host = f"CPU: {c['physical_cores']} cores ({c['model']})"
    if device == "gpu" and fp["gpus"]:
        return f"GPU: 1 * {fp['gpus'][0]['name']}; {host}"
    if device == "ascend" and fp["ascend"]:
        return f"Ascend: 1 * {fp['ascend'][0]['name']}; {host}"
    return host
