"""Print the machine fingerprint that every dlbench record carries.

Reads the hardware from /proc, psutil, nvidia-smi and npu-smi, and versions
from package metadata: no framework is imported.  ``--peak`` also measures
this machine's GEMM peak on each device (in a separate process) and stores
it, so that ``dlbench bench`` can report each cell's share of it.
"""

from __future__ import annotations

import json

HELP = "show this machine's fingerprint (CPU, memory, GPUs, Ascend, library versions)"


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument(
        "--peak", action="store_true", help="also measure the GEMM peak (GFLOP/s) of each device and store it"
    )
    p.add_argument(
        "--peak-seconds",
        type=float,
        default=2.0,
        help="seconds per device and precision for --peak (default 2)",
    )
    p.add_argument(
        "--peak-threads",
        default=None,
        metavar="N[,N...]",
        help="CPU thread counts to measure the peak at (default physical cores); "
        "a bench at another count measures its own the first time",
    )
    p.add_argument(
        "--db",
        default=None,
        help="results database for --peak, and whose tunes the hints read (default $DLBENCH_DB "
        "or results/dlbench.sqlite)",
    )


def run(args) -> int:
    from dlbench.harness.machine.fingerprint import fingerprint

    fp = fingerprint()
    peaks = _peaks(args) if args.peak else None
    hints = _hints(args, fp["machine_id"])
    if args.json:
        fp = dict(fp, hints=hints)
        if peaks is not None:
            fp = dict(
                fp,
                peak=[
                    {
                        "device": r["device"],
                        "precision": r["precision"],
                        "status": r["status"],
                        "error": r["error"],
                        **r["metrics"],
                        "library": r["context"]["library"],
                    }
                    for r in peaks
                ],
            )
        print(json.dumps(fp, indent=2, sort_keys=True))
        return 0 if not peaks or all(r["status"] == "ok" for r in peaks) else 1
    c = fp["cpu"]
    lines = [
        f"machine id      {fp['machine_id']}",
        f"host            {fp['hostname']} ({fp['os']})",
        f"CPU             {c['model']} ({c['architecture']}), {c['physical_cores']} physical / "
        f"{c['logical_cores']} logical cores, ISA: {', '.join(c['isa']) or '-'}",
        *_confined(),
        f"memory          {fp['memory_gib']} GiB",
        "GPU             "
        + (
            "; ".join(
                f"{g['name']} (driver {g['driver']}, {g['memory']}, sm {g['compute_capability']})"
                for g in fp["gpus"]
            )
            or "none"
        ),
        "Ascend          " + ("; ".join(a["name"] for a in fp["ascend"]) or "none"),
        f"Python          {fp['python']} ({fp['python_executable']})",
        f"dlbench         {fp['dlbench']}" + (f" ({fp['git_commit']})" if fp["git_commit"] else ""),
    ]
    lines += [f"{name:<15} {ver}" for name, ver in sorted(fp["versions"].items())]
    if fp["lock_drift"]:
        lines.append(
            "not as locked   "
            + ", ".join(f"{d['package']} {d['installed']} (lock {d['lock']})" for d in fp["lock_drift"])
            + ": the suite passed with the lock's versions (make install applies it)"
        )
    if peaks:
        from dlbench.harness.output.tables import counted
        from dlbench.harness.stats import contended
    for r in peaks or []:
        if r["status"] == "ok":
            lines.append(
                f"peak GEMM       {r['device']} {r['precision']}: "
                f"{r['metrics']['gflops']:.1f} GFLOP/s ({r['context']['library']}, "
                f"n={r['metrics']['n']}"
                + (f", {counted(r['intra_op_threads'], 'thread')})" if r["device"] == "cpu" else ")")
                + (
                    f"; BUSY: others held {r['metrics']['contended_share']:.0%} of its CPUs, "
                    "so it reads low and is used only until a quiet one is measured"
                    if contended(r["metrics"])
                    else ""
                )
            )
        else:
            lines.append(f"peak GEMM       {r['device']}: FAILED: {r['error']}")
    print("\n".join(lines + hints))
    return 0 if not peaks or all(r["status"] == "ok" for r in peaks) else 1


def _hints(args, machine_id: str) -> list[str]:
    """What the tunes stored in the results database say about this machine's defaults."""
    from dlbench.harness.store.results import ResultStore
    from dlbench.harness.tune.hints import default_hints

    return default_hints(ResultStore(args.db), machine_id)


def _peaks(args):
    from dlbench.core.errors import UserError
    from dlbench.harness.bench.peak import measure_peaks

    if args.peak_seconds <= 0:
        raise UserError("--peak-seconds must be positive")
    threads = None
    if args.peak_threads:
        from dlbench.core.flags import split

        threads = split([args.peak_threads], int)
        if not threads or min(threads) < 1:
            raise UserError("--peak-threads takes thread counts of at least 1")
    return measure_peaks(args.db, args.peak_seconds, threads=threads)


def _confined() -> list[str]:
    """A line when this process may use only some CPUs: the default thread count follows."""
    from dlbench.harness.cells.threads import affinity_in_force, usable_cores

    cpus = affinity_in_force()
    if cpus is None:
        return []
    return [
        f"confined to     CPUs {','.join(map(str, cpus))}: {usable_cores()} physical "
        f"core(s), the default thread count"
    ]
