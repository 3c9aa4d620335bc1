"""Print the machine fingerprint that every dlbench record carries.

Reads the hardware from /proc, psutil, nvidia-smi and npu-smi, and versions
from package metadata: no framework is imported.
"""
from __future__ import annotations

import json

HELP = "show this machine's fingerprint (CPU, memory, GPUs, Ascend, library versions)"


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def run(args) -> int:
    from harness.fingerprint import fingerprint

    fp = fingerprint()
    if args.json:
        print(json.dumps(fp, indent=2, sort_keys=True))
        return 0
    c = fp["cpu"]
    lines = [
        f"machine id      {fp['machine_id']}",
        f"host            {fp['hostname']} ({fp['os']})",
        f"CPU             {c['model']} ({c['architecture']}), {c['physical_cores']} physical / "
        f"{c['logical_cores']} logical cores, ISA: {', '.join(c['isa']) or '-'}",
        f"memory          {fp['memory_gib']} GiB",
        "GPU             " + ("; ".join(f"{g['name']} (driver {g['driver']}, {g['memory']}, "
                                        f"sm {g['compute_capability']})" for g in fp["gpus"])
                              or "none"),
        "Ascend          " + ("; ".join(a["name"] for a in fp["ascend"]) or "none"),
        f"Python          {fp['python']} ({fp['python_executable']})",
        f"dlbench         {fp['dlbench']}" + (f" ({fp['git_commit']})" if fp["git_commit"] else ""),
    ]
    lines += [f"{name:<15} {ver}" for name, ver in sorted(fp["versions"].items())]
    print("\n".join(lines))
    return 0
