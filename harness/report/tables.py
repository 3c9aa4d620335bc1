"""The published tables (training, inference, conversion) built from stored records.

A table is kept as headers + rows + notes so that Markdown and HTML render the
same cells; every table names the machines its numbers came from, and a table
over several machines gets a Machine column rather than silently mixing them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dlbench.harness import stats
from dlbench.harness.machine.frameworks import FRAMEWORKS
from dlbench.harness.output.tables import (
    ROUGH_P99,
    add_context_columns,
    artifact_label,
    cpu_mark,
    cpu_note,
    markdown,
    milliseconds,
    network_name,
    spec_unit,
    zoo_spec,
)


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[Any]]
    machine_ids: list[str]
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- formatting


def num(x: float | None) -> str:
    """Four significant digits without an exponent (13689, 251.5, 5.393), as the seeds print."""
    if x is None:
        return "-"
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    decimals = max(0, 3 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"


def unit(record: dict[str, Any]) -> str:
    """What one sample is: an image for image models, a sentence for token models."""
    spec = zoo_spec(record.get("model"))
    if spec is not None:
        return spec_unit(spec)
    inputs = (record.get("context") or {}).get("inputs") or []
    if any(len(i.get("shape") or ()) == 4 and str(i.get("dtype", "")).startswith("float") for i in inputs):
        return "images/sec"
    if inputs and all(str(i.get("dtype", "")).startswith(("int", "bool")) for i in inputs):
        return "sentences/sec"
    return "samples/sec"


def devices(record: dict[str, Any]) -> int:
    cfg = (record.get("context") or {}).get("config") or {}
    try:
        return max(1, int(cfg.get("devices") or 1))
    except (TypeError, ValueError):
        return 1


def _framework(record: dict[str, Any]) -> str:
    fw = FRAMEWORKS.get(record.get("framework") or "")
    name = fw.display if fw else (record.get("framework") or "")
    return f"{name} {record.get('framework_version') or ''}".strip()


def failed_text(record: dict[str, Any]) -> str:
    return f"FAILED: {record.get('error') or 'no reason recorded'}"


def with_machine(table: Table, records: Sequence[dict[str, Any]]) -> Table:
    """Records from several machines share a table only with a Machine column."""
    if len(table.machine_ids) > 1:
        table.headers.insert(0, "Machine")
        for row, r in zip(table.rows, records):
            row.insert(0, r["machine_id"])
    return table


def _with_allocator(table: Table, records: Sequence[dict[str, Any]]) -> Table:
    """Records with different allocators or --with environments share a table only with
    a column for it (before Precision), and kernel-bound rows get their footnote once."""
    add_context_columns(table.headers, table.rows, records)
    note = cpu_note(records)
    if note:
        table.notes.append(note)
    return table


def machine_ids(records: Sequence[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(r["machine_id"] for r in records))


# ---------------------------------------------------------------- training


def _speedups(records: Sequence[dict[str, Any]]) -> dict[int, float | None]:
    """Scaling efficiency, as the seed: throughput(N) / (N x throughput(1)) of the same
    model, framework, device kind, precision and batch size (the newest 1-device run)."""
    base: dict[tuple, float] = {}

    def key(r):
        return (
            r.get("model"),
            r.get("framework"),
            r.get("device"),
            r.get("precision"),
            r.get("batch_size"),
        )

    for r in records:
        if r["status"] == "ok" and devices(r) == 1 and r.get("throughput_sps"):
            base[key(r)] = r["throughput_sps"]
    out: dict[int, float | None] = {}
    for r in records:
        n = devices(r)
        if n > 1 and r["status"] == "ok" and r.get("throughput_sps") is not None:
            one = base.get(key(r))
            out[r["id"]] = r["throughput_sps"] / (n * one) if one else None
    return out


def training(records: Sequence[dict[str, Any]]) -> Table:
    records = sorted(
        (r for r in records if r["kind"] == "train"),
        key=lambda r: (
            r.get("model") or "",
            r.get("framework") or "",
            r.get("device") or "",
            r.get("precision") or "",
            r.get("batch_size") or 0,
            devices(r),
            r["id"],
        ),
    )
    with_eval = any((r.get("metrics") or {}).get("eval") for r in records)
    headers = [
        "Network",
        "Network type",
        "Dataset",
        "Framework version",
        "Resource",
        "Precision",
        "Batch size",
        "Throughput",
        "Speedup",
    ] + (["Loss", "Acc"] if with_eval else [])
    speedups = _speedups(records)
    rows = []
    for r in records:
        spec = zoo_spec(r.get("model"))
        m, c = r.get("metrics") or {}, r.get("context") or {}
        head = [
            spec.display_name if spec else r.get("model"),
            spec.network_type if spec else "",
            spec.dataset if spec else "",
            _framework(r),
            c.get("resource") or r.get("device"),
            "Mixed" if r.get("precision") == "amp" else r.get("precision"),
            r.get("batch_size"),
        ]
        if r["status"] != "ok":
            rows.append(head + [failed_text(r), ""] + (["", ""] if with_eval else []))
            continue
        n = devices(r)
        sp = speedups.get(r["id"])
        speedup = "-" if n == 1 else ("n/a (no 1-device run)" if sp is None else f"{sp:.2f}")
        row = head + [f"{num(r.get('throughput_sps'))} {unit(r)}{cpu_mark(r)}", speedup]
        if with_eval:
            ev = m.get("eval") or {}
            acc = ev.get("accuracy")
            row += [
                num(ev.get("loss")) if ev.get("loss") is not None else "",
                "" if acc is None else (f"{acc:.1%}" if acc <= 1 else f"{acc:.1f}%"),
            ]
        rows.append(row)
    table = with_machine(
        _with_allocator(Table("Training", headers, rows, machine_ids(records)), records), records
    )
    _blank_repeats(table, 4 + (len(table.machine_ids) > 1))
    if any(devices(r) > 1 for r in records):
        table.notes.append(
            "Speedup: throughput on N devices / (N x throughput on 1 device), "
            "same network, framework, precision and batch size."
        )
    return table


def _blank_repeats(table: Table, width: int) -> None:
    """The seed prints a network's name, type, dataset and version once per group."""
    previous = None
    for row in table.rows:
        prefix = row[:width]
        if prefix == previous:
            row[:width] = [""] * width
        previous = prefix


# ---------------------------------------------------------------- inference

ABOVE_PEAK = (
    "† Above 100 % of the measured GEMM peak: impossible, so the FLOP count or the "
    "peak is wrong (most often a peak measured while other work loaded the machine, "
    "which reads low: measure it again on a quiet machine with dlbench env --peak). "
    "Not a result."
)
UNVERIFIED = (
    "UNVERIFIED: the file did not pass verification (dlbench build/verify): its "
    "outputs differ from its source's beyond tolerance, so its speed is not the "
    "speed of the model it claims to be."
)
ROUGH_P50 = f"* p50 from fewer than {stats.min_samples_for(50)} samples: a rough figure."


def artifact_verdict(
    record: dict[str, Any], verdicts: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any] | None:
    """The newest verdict on the benchmarked file's bytes (``verdicts``: sha256 -> row of
    the artifacts table), else the one the record took at bench time; None if never judged."""
    art = (record.get("context") or {}).get("artifact") or {}
    sha = art.get("sha256")
    if verdicts and sha and sha in verdicts:
        return verdicts[sha]
    return art.get("verification")


def _latency(lat: dict[str, Any], support: dict[str, bool]) -> str:
    return " / ".join(
        f"{milliseconds(lat.get(q))}{'' if support.get(q, True) else '*'}" for q in ("p50", "p99")
    )


def _unstable(m: dict[str, Any]) -> str:
    if "stability" in m:
        return stats.describe_stability(m["stability"])
    cv, limit = m.get("cv"), m.get("cv_threshold")  # records from before the IQR rule
    return "noisy" if cv is None or limit is None else f"CV {cv * 100:.3g}% > {limit * 100:.3g}%"


def inference(records: Sequence[dict[str, Any]], verdicts: dict[str, dict[str, Any]] | None = None) -> Table:
    records = sorted(
        (r for r in records if r["kind"] == "bench"),
        key=lambda r: (
            r.get("model") or "",
            artifact_label(r),
            r.get("backend") or "",
            r.get("device") or "",
            r.get("precision") or "",
            r.get("scenario") or "",
            r.get("batch_size") or 0,
            r["id"],
        ),
    )
    headers = [
        "Model",
        "Artifact",
        "Backend",
        "Device",
        "Precision",
        "Batch",
        "Scenario",
        "Throughput",
        "p50 / p99 latency",
        "% of peak",
    ]
    rows, rough, flags = [], set(), set()
    for r in records:
        m, c = r.get("metrics") or {}, r.get("context") or {}
        label = artifact_label(r)
        verdict = artifact_verdict(r, verdicts)
        if verdict is not None and not verdict.get("verified"):
            label = f"UNVERIFIED {label}"
            flags.add("unverified")
        head = [
            network_name(r.get("model")),
            label,
            f"{r.get('backend')} {r.get('backend_version') or ''}".strip(),
            c.get("resource") or r.get("device"),
            r.get("precision"),
            r.get("batch_size"),
            r.get("scenario"),
        ]
        if r["status"] == "failed":
            rows.append(head + [failed_text(r), "", ""])
            continue
        thr = f"{num(r.get('throughput_sps'))} {unit(r)}"
        if r["status"] == "unstable":
            thr += f" (UNSTABLE: {_unstable(m)})"
        thr += cpu_mark(r)
        bound = (m.get("server") or {}).get("latency_bound_ms")
        if r.get("scenario") == "server" and bound:
            thr += f" at p99 <= {bound:g} ms"
        lat, support = m.get("latency_ms") or {}, m.get("percentile_support") or {}
        rough |= {q for q in ("p50", "p99") if lat and not support.get(q, True)}
        pct = m.get("percent_of_peak")
        peak = "" if pct is None else f"{pct:.1f}%"
        if pct is not None and pct > 100:
            peak = f"INVALID: {pct:.1f}%†"
            flags.add("above peak")
        rows.append(head + [thr, _latency(lat, support) if lat else "", peak])
    table = with_machine(
        _with_allocator(Table("Inference", headers, rows, machine_ids(records)), records), records
    )
    table.notes += [note for q, note in (("p50", ROUGH_P50), ("p99", ROUGH_P99)) if q in rough]
    if any(r["status"] == "unstable" for r in records):
        table.notes.append(
            "UNSTABLE: the figure is stored, not trusted: the IQR / median of its per-iteration "
            "latencies exceeded --iqr-threshold (within a process), or the throughputs of its "
            "--repeats processes spread more than --repeat-spread-threshold (between processes)."
        )
    if "unverified" in flags:
        table.notes.append(UNVERIFIED)
    if "above peak" in flags:
        table.notes.append(ABOVE_PEAK)
    return table


# ---------------------------------------------------------------- conversion


# ---------------------------------------------------------------- machines


def machine_line(machine_id: str, fp: dict[str, Any] | None) -> str:
    """One line: the hardware and the library versions a table's numbers were measured with."""
    if not fp or "cpu" not in fp:
        return f"machine {machine_id} (fingerprint not stored)"
    c = fp["cpu"]
    isa = f", {' '.join(c['isa'])}" if c.get("isa") else ""
    gpus = fp.get("gpus") or []
    if gpus:
        g = gpus[0]
        gpu = f"{len(gpus)} x {g['name']} ({g.get('memory', '')}, driver {g.get('driver', '?')})"
    else:
        gpu = "none"
    npus = fp.get("ascend") or []
    npu = f"; NPU: {len(npus)} x {npus[0]['name']}" if npus else ""
    libs = ", ".join(f"{k} {v}" for k, v in sorted((fp.get("versions") or {}).items()))
    commit = f" ({fp['git_commit']})" if fp.get("git_commit") else ""
    return (
        f"machine {machine_id}: CPU {c.get('model')} ({c.get('architecture', '')}{isa}), "
        f"{c.get('physical_cores')} physical / {c.get('logical_cores')} logical cores, "
        f"{fp.get('memory_gib')} GiB memory, GPU: {gpu}{npu}; {fp.get('os', '')}, "
        f"Python {fp.get('python', '?')}; libraries: {libs or 'none recorded'}; "
        f"dlbench {fp.get('dlbench', '?')}{commit}."
    )


def machines_for(
    records: Sequence[dict[str, Any]], machines: dict[str, dict[str, Any]] | None
) -> dict[str, dict[str, Any] | None]:
    """Fingerprints by id; without them, this machine's own (what `dlbench run` just measured)."""
    if machines is None:
        from dlbench.harness.machine.fingerprint import fingerprint

        here = fingerprint()
        machines = {here["machine_id"]: here}
    return {mid: machines.get(mid) for mid in machine_ids(records)}


# ---------------------------------------------------------------- Markdown


def _md_cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("\n", " ").replace("|", "\\|")


def micro(records: Sequence[dict[str, Any]]) -> Table:
    """``dlbench micro`` and ``dlbench layer`` cells, in the order they ran."""
    from dlbench.harness.micro.table import HEADERS, micro_rows

    cells = sorted((r for r in records if r["kind"] == "micro"), key=lambda r: r["id"])
    notes = (
        [
            "GFLOP/s and GB/s count the least work and bytes one call must do; % of peak is "
            "against this machine's measured GEMM peak (dlbench env --peak) at the cell's "
            "threads, a memory stream's against the best stream here; a train layer counts "
            "three forwards."
        ]
        if cells
        else []
    )
    return Table(
        "Micro and layer benchmarks",
        list(HEADERS),
        micro_rows(cells),
        sorted({r["machine_id"] for r in cells}),
        notes,
    )


def to_markdown(table: Table, machines: dict[str, dict[str, Any]] | None) -> str:
    body = markdown(table.headers, [[_md_cell(c) for c in row] for row in table.rows])
    fps = machines or {}
    paragraphs = [
        body,
        *table.notes,
        *("Measured on " + machine_line(mid, fps.get(mid)) for mid in table.machine_ids),
    ]
    return "\n\n".join(paragraphs)
