"""The machine a number was measured on.

Collected without importing any framework: the CPU from /proc/cpuinfo and
psutil, NVIDIA GPUs from nvidia-smi, Ascend NPUs from npu-smi or the davinci
device nodes, versions from package metadata.  ``machine_id`` hashes only the
hardware and OS fields, so the same machine keeps its id across library
upgrades while results from different hardware never share one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import psutil

from dlbench.core.frameworks import FRAMEWORKS
from dlbench.harness.backends import all_backends
from dlbench.harness.machine import lock
from dlbench.harness.machine.frameworks import OTHER_PACKAGES, distribution_version
from dlbench.harness.machine.hardware import ascend_npus, command_output, cpu, nvidia_gpus


def versions() -> dict[str, str]:
    """Every package whose version can change a number: the frameworks, each backend's
    (from its declaration: a plugin's too), and the conversions' libraries."""
    backends = [p for b in all_backends() for p in b.packages()]
    names = list(
        dict.fromkeys([fw.distribution for fw in FRAMEWORKS.values()] + backends + list(OTHER_PACKAGES))
    )
    found = {name: distribution_version(name) for name in names}
    return {k: v for k, v in found.items() if v}


def _git_commit() -> str | None:
    # realpath: imported through the dlbench/ links, __file__ is dlbench/harness/...; the
    # checkout is the folder above the real harness/.
    here = str(Path(os.path.realpath(__file__)).parents[2])  # harness/machine/ -> checkout
    if not os.path.isdir(os.path.join(here, ".git")):
        return None
    out = command_output(["git", "-C", here, "rev-parse", "--short=12", "HEAD"])
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
