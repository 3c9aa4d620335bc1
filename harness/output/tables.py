"""Tables in the seeds' layout, rendered as Markdown (GitHub pipes) or plain text."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dlbench.core.frameworks import FRAMEWORKS
from dlbench.harness.stats import CONTENDED_BOUND, contended
from dlbench.models.registry import get_model


def cell(value: Any) -> str:
    """A value as one Markdown table cell: a ``|`` (in a model's name) would start a new
    column and a newline (an engine's multi-line error) would end the row."""
    text = "" if value is None else str(value)
    return " ".join(text.split("\n")).replace("\r", " ").replace("|", "\\|")


def counted(n: int, noun: str) -> str:
    """``1 thread``, ``2 threads``: titles and labels read as sentences."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def markdown(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[cell(c) for c in headers]] + [[cell(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    fmt = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731 - a one-line helper used right here
    return "\n".join([fmt(cells[0]), "| " + " | ".join("-" * w for w in widths) + " |", *map(fmt, cells[1:])])


TRAIN_HEADERS = (
    "Network",
    "Framework",
    "Resource",
    "Precision",
    "Batch size",
    "Throughput (images/sec)",
    "Step time median (p90)",
    "Warm-up",
    "Loss first → last",
    "Peak RSS",
)
THROUGHPUT_COLUMN = 5


def spec_unit(spec) -> str:
    """What one sample of a zoo model is, as a throughput unit: an image for image
    models, a sentence for token (text) models, a sample (one user's candidate ad)
    for click-through-rate models, whose integer ids are no text."""
    if spec.task == "ctr-prediction":
        return "samples/sec"
    if spec.task.startswith("image") or any(
        len(i.shape) == 3 and i.dtype.startswith("float") for i in spec.inputs
    ):
        return "images/sec"
    if any(i.dtype.startswith("int") for i in spec.inputs):
        return "sentences/sec"
    return "samples/sec"


def zoo_spec(model: str | None):
    """The zoo spec a record names, or None: any ONNX model is welcome, and a record may
    outlive its model."""
    try:
        return get_model(model)
    except Exception:  # noqa: BLE001 - not a zoo model (any more)
        return None


def network_name(model: str | None) -> str | None:
    """The published name of a zoo model ("ResNet-50"); any other name stays as it is."""
    spec = zoo_spec(model)
    return spec.display_name if spec else model


ROUGH_P99 = (
    "* p99 from fewer samples than it needs (688 for 99.9 % confidence that the "
    "largest sample lies above the true p99): a rough figure."
)


def cpu_mark(record: dict[str, Any]) -> str:
    """The short marks a cell's throughput gets for where its CPU time went: " (kernel
    82%)" when kernel-bound, " (others 35%)" when other processes held its CPUs.  The
    explanations are printed once under the table (``cpu_note``), not on every row."""
    m = record.get("metrics") or {}
    mark = ""
    if m.get("kernel_bound") and m.get("kernel_share") is not None:
        mark += f" (kernel {m['kernel_share']:.0%})"
    if contended(m):
        mark += f" (others {m['contended_share']:.0%})"
    return mark


def cpu_note(records: Sequence[dict[str, Any]]) -> str | None:
    """The footnotes for a table's marked cells, each distinct hint once."""
    from dlbench.harness.cells.cpuusage import KERNEL_BOUND

    live = [r for r in records if r.get("status") != "failed"]
    notes = []
    flagged = [r for r in live if (r.get("metrics") or {}).get("kernel_bound")]
    if flagged:
        faults = sorted((r.get("metrics") or {}).get("minor_faults_per_iteration") or 0 for r in flagged)
        spread = f"{faults[0]:,.0f}" + (f" to {faults[-1]:,.0f}" if faults[-1] != faults[0] else "")
        hints = list(dict.fromkeys((r.get("metrics") or {}).get("kernel_hint") or "" for r in flagged))
        notes.append(
            f"(kernel N%): N% of the measured window's CPU time went to the kernel, "
            f"over {KERNEL_BOUND:.0%} ({spread} minor page faults per iteration); "
            + "; ".join(h for h in hints if h)
            + "."
        )
    if any(contended(r.get("metrics") or {}) for r in live):
        notes.append(
            f"(others N%): N% of the CPUs the cell ran on went to other processes "
            f"or the hypervisor (steal) while it measured, over "
            f"{CONTENDED_BOUND:.0%}: the figure is not the cell's alone; measure "
            f"again on an idle machine."
        )
    return "\n\n".join(notes) or None


def allocator_of(record: dict[str, Any]) -> str:
    """The allocator a record's cells ran with ("unrecorded" before dlbench recorded it)."""
    return ((record.get("context") or {}).get("allocator") or {}).get("name") or "unrecorded"


def with_of(record: dict[str, Any]) -> str:
    """The --with environment a record's cell ran in ("installed": dlbench's own packages)."""
    return (record.get("context") or {}).get("with") or "installed"


def add_context_columns(headers: list[str], rows: list[list[Any]], records: Sequence[dict[str, Any]]) -> None:
    """Allocator and With (--with) columns before Precision, in place, each only when the
    rows differ in it: they would otherwise look alike; and a column per dimension a
    ``--dim`` sweep varied (a sequence length), which reads like the batch size."""
    swept = sorted({d for r in records for d in ((r.get("context") or {}).get("dims") or {})})
    columns: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("Allocator", allocator_of),
        ("With", with_of),
    ]
    columns += [(d, _dim_of(d)) for d in swept]
    for title, value in columns:
        if len({value(r) for r in records}) > 1:
            at = headers.index("Precision")
            headers.insert(at, title)
            for row, r in zip(rows, records):
                row.insert(at, value(r))


def _dim_of(name: str) -> Callable[[dict[str, Any]], str]:
    return lambda r: str(((r.get("context") or {}).get("dims") or {}).get(name, ""))


def milliseconds(ms: float | None) -> str:
    """A latency in the unit that keeps it short: "8.31 ms", "1.2 s", "-" when not measured."""
    if ms is None:
        return "-"
    return f"{ms:.3g} ms" if ms < 1000 else f"{ms / 1000:.3g} s"


def artifact_label(record: dict[str, Any]) -> str:
    """What a bench record measured: the file's format and where it came from ("onnx from
    pytorch"), so an ONNX file from PyTorch and one from TensorFlow are told apart."""
    art = (record.get("context") or {}).get("artifact") or {}
    fmt = art.get("format") or ""
    if fmt == "zoo":
        return "zoo, random weights"
    label = fmt.replace("-checkpoint", " checkpoint")
    framework = record.get("framework")
    if framework and not fmt.startswith(framework):
        label += f" from {framework}"
    path = art.get("path") or ""
    name = path.rsplit("/", 1)[-1]
    return f"{label} ({name})" if name and fmt in ("onnx", "tensorrt-engine", "mindir") else label


def backend_label(record: dict[str, Any]) -> str:
    """The backend, its version and every option the record ran with that is not the
    backend's default ("tensorflow 2.21.0 (eager)", "pytorch 2.13.0 (compile=default)"):
    two rows that differ only in an option would otherwise read alike."""
    label = f"{record.get('backend')} {record.get('backend_version') or ''}".strip()
    given = (record.get("context") or {}).get("options") or {}
    changed = _changed_options(str(record.get("backend")), given)
    return f"{label} ({', '.join(changed)})" if changed else label


def _changed_options(backend: str, given: dict[str, Any]) -> list[str]:
    from dlbench.core.errors import UserError
    from dlbench.harness.backends import get_backend

    try:
        declared = get_backend(backend)
    except UserError:  # a plugin's backend that is not installed here: no defaults to read
        return []
    out = []
    for name, value in given.items():
        option = declared.option(name)
        if option is None or value == option.default:
            continue
        out.append(name if option.switch and value == "on" else f"{name}={value}")
    return out


def model_unit(model: str | None) -> str | None:
    """``spec_unit`` of a zoo model by name; None when the name is not a zoo model."""
    spec = zoo_spec(model)
    return spec_unit(spec) if spec else None


def train_headers(records: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    """The training headers with the records' own throughput unit (samples/sec if mixed)."""
    units = {model_unit(r.get("model")) or "samples/sec" for r in records}
    unit = units.pop() if len(units) == 1 else "samples/sec"
    headers = list(TRAIN_HEADERS)
    headers[THROUGHPUT_COLUMN] = f"Throughput ({unit})"
    return tuple(headers)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def train_rows(records: Sequence[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for r in records:
        fw = FRAMEWORKS.get(r["framework"])
        framework = f"{fw.display if fw else r['framework']} {r.get('framework_version') or ''}"
        if r.get("context", {}).get("config", {}).get("eager") and (fw is None or fw.compiles_steps):
            framework = f"{framework.strip()} (eager)"  # its steps are not the compiled graph's
        network = network_name(r["model"])
        m = r.get("metrics", {})
        resource = r.get("context", {}).get("resource") or r.get("device")
        rss = f"{r['peak_rss_mb']:.0f} MB" if r.get("peak_rss_mb") else ""
        if r["status"] != "ok":
            rows.append(
                [
                    network,
                    framework.strip(),
                    resource,
                    r["precision"],
                    r["batch_size"],
                    f"FAILED: {r.get('error')}",
                    "",
                    "",
                    "",
                    rss,
                ]
            )
            continue
        st = m["step_time_s"]
        rows.append(
            [
                network,
                framework.strip(),
                resource,
                r["precision"],
                r["batch_size"],
                f"{r['throughput_sps']:.2f}{cpu_mark(r)}",
                f"{_ms(st['p50'])} ({_ms(st['p90'])})",
                f"{m['warmup_steps']} steps, {m['warmup_total_s']:.1f} s",
                f"{m['loss_start']:.3f} → {m['loss_end']:.3f}",
                rss,
            ]
        )
    return rows


def _extra_columns(records: Sequence[dict[str, Any]]) -> list[tuple[str, Any]]:
    """Columns shown only when some record has them: real-data reading time per
    step (and throughput with it) and held-out loss/accuracy from ``--eval``."""

    def data_cell(m):
        dt = m.get("data_time")
        if not dt or not dt.get("total"):
            return ""
        return f"{_ms(dt['p50'])} ({m['throughput_with_data_sps']:.2f}/s)"

    def eval_cell(m):
        ev = m.get("eval")
        if not ev:
            return ""
        acc = "-" if ev.get("accuracy") is None else f"{ev['accuracy'] * 100:.1f} %"
        if ev.get("auc") is not None:  # click-through-rate models (harness.evaluate.scoring)
            acc += f", AUC {ev['auc']:.3f}"
        return f"{ev['loss']:.3f} / {acc} ({ev['samples']})"

    cols = []
    if any(data_cell(r.get("metrics") or {}) for r in records):
        cols.append(("Data time median (throughput with data)", data_cell))
    if any((r.get("metrics") or {}).get("eval") for r in records):
        cols.append(("Eval loss / acc (samples)", eval_cell))
    return cols


def train_table(records: Sequence[dict[str, Any]]) -> str:
    extra = _extra_columns(records)
    rows = [
        row + [cell(r.get("metrics") or {}) if r["status"] == "ok" else "" for _, cell in extra]
        for r, row in zip(records, train_rows(records))
    ]
    headers = list(train_headers(records) + tuple(h for h, _ in extra))
    add_context_columns(headers, rows, records)
    note = cpu_note(records)
    return markdown(headers, rows) + (f"\n\n{note}" if note else "")


SCALING_HEADERS = (
    "Network",
    "Network Type",
    "Dataset",
    "Framework",
    "Resource",
    "Precision",
    "Batch Size (per device)",
    "Throughput",
    "Speedup",
    "T_N/T_1",
    "Rank step time min–max",
)
SCALING_NOTE = (
    "Speedup = T_N/(N·T_1): scaling efficiency, 1.00 is perfect (the MindSpore "
    "page's definition); T_N/T_1 is the raw gain. T_N is the throughput on N "
    "devices (global samples over the span from the earliest rank's start to the "
    "latest rank's end), T_1 the same cell's on one device."
)


def scaling_table(records: Sequence[dict[str, Any]]) -> str:
    """Data-parallel training cells in the MindSpore benchmark page's layout, each compared
    with its one-device cell (same model, framework, precision, per-device batch, scaling
    mode and machine); without one, Speedup stays empty rather than guessed."""
    from dlbench.harness.compare.match import field

    def key(r):
        return (
            r["model"],
            r["framework"],
            r["precision"],
            r["batch_size"],
            field(r, "scaling"),
            r.get("machine_id"),
        )

    def world(r):
        return field(r, "devices") or 1

    ones = {key(r): r["throughput_sps"] for r in records if r["status"] == "ok" and world(r) == 1}
    unit = train_headers(records)[THROUGHPUT_COLUMN].removeprefix("Throughput ")
    rows = []
    for r in records:
        spec = zoo_spec(r["model"])
        c = r.get("context") or {}
        fw = FRAMEWORKS.get(r["framework"])
        head = [
            network_name(r["model"]),
            spec.network_type if spec else "",
            (c.get("config") or {}).get("data", ""),
            f"{fw.display if fw else r['framework']} {r.get('framework_version') or ''}",
            c.get("resource") or r.get("device"),
            r["precision"],
            r["batch_size"],
        ]
        if r["status"] != "ok":
            rows.append(head + [f"FAILED: {r.get('error')}", "", "", ""])
            continue
        m = r.get("metrics") or {}
        t1, n = ones.get(key(r)), world(r)
        spread = (
            f"{_ms(m['rank_step_time_min_s'])}–{_ms(m['rank_step_time_max_s'])}"
            if "rank_step_time_min_s" in m
            else ""
        )
        rows.append(
            head
            + [
                f"{r['throughput_sps']:.2f}{cpu_mark(r)}",
                f"{r['throughput_sps'] / (n * t1):.2f}" if t1 else "",
                f"{r['throughput_sps'] / t1:.2f}" if t1 else "",
                spread,
            ]
        )
    headers = list(SCALING_HEADERS)
    headers[7] = f"Throughput {unit}"
    notes = "\n\n".join(filter(None, [SCALING_NOTE, cpu_note(records)]))
    return f"{markdown(headers, rows)}\n\n{notes}"
