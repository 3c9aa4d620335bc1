"""The report's tables: the shared Table, cell formats, the training and micro tables,
the machine lines, and the Markdown rendering (inference and conversion tables have
modules of their own).

A table is kept as headers + rows + notes so that Markdown and HTML render the
same cells; every table names the machines its numbers came from, and a table
over several machines gets a Machine column rather than silently mixing them.
Both renderings take the table through ``legible``: long free text in a cell
becomes a numbered note under the table (``output.footnotes``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dlbench.core.frameworks import FRAMEWORKS
from dlbench.harness.output.footnotes import footnote_long_cells
from dlbench.harness.output.tables import (
    add_context_columns,
    cpu_mark,
    cpu_note,
    markdown,
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


def with_allocator(table: Table, records: Sequence[dict[str, Any]]) -> Table:
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
        with_allocator(Table("Training", headers, rows, machine_ids(records)), records), records
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


def legible(table: Table) -> Table:
    """The table as it is printed: each long free-text cell (an error, a verdict's
    reasons) cut to its verdict word and a marker, the full text a numbered note
    first under the table, before the table's own notes."""
    rows, numbered = footnote_long_cells(table.rows)
    return replace(table, rows=rows, notes=numbered + table.notes)


def to_markdown(table: Table, machines: dict[str, dict[str, Any]] | None) -> str:
    table = legible(table)
    body = markdown(table.headers, table.rows)  # markdown() escapes pipes and newlines
    fps = machines or {}
    paragraphs = [
        body,
        *table.notes,
        *("Measured on " + machine_line(mid, fps.get(mid)) for mid in table.machine_ids),
    ]
    return "\n\n".join(paragraphs)
