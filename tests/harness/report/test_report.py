"""``dlbench report`` over REAL records: a tiny network trained, exported, quantized and
benchmarked through the CLI (each cell in a process of its own), then every table checked against the
database rows, the CSV/JSON round trips, the HTML charts, and every bad input."""

from __future__ import annotations

import base64
import copy
import csv
import html as html_lib
import io
import json
import re
import sqlite3

import pytest

from dlbench.harness import report
from dlbench.harness.bench.peak_share import beyond_peak
from dlbench.harness.report import tables
from dlbench.harness.report.inference import ABOVE_PEAK, UNVERIFIED
from dlbench.harness.store.results import ResultStore
from dlbench.models.registry import get_model
from tests.utils.clitools import assert_usage_error, run_cli

MODEL = "resnet50-mini"
QUICK = ("--iterations", "5", "--warmup", "1", "--max-warmup", "2", "--no-progress")


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """One database with every kind of record a report shows, made once for the module."""
    tmp = tmp_path_factory.mktemp("report")
    path, out = tmp / "results.sqlite", tmp / "runs"
    onnx = out / MODEL / "pytorch" / "model.onnx"

    def cli(*args, ok=(0,)):
        res = run_cli(*args, "--db", path, env={"DLBENCH_DB": path})
        assert res.returncode in ok, (args, res.stderr[-3000:])

    cli(
        "train",
        MODEL,
        "--framework",
        "pytorch",
        "--steps",
        "2",
        "--warmup-steps",
        "1",
        "--batch-size",
        "4",
        "--threads",
        "1",
        "--out",
        str(out),
    )
    cli("export", str(out / MODEL / "pytorch"))
    cli("build", str(onnx), "--to", "int8", "--calib-size", "8", ok=(0, 1))  # 1: unverified
    cli("env", "--peak", "--peak-seconds", "0.3")
    cli("bench", str(onnx), "-b", "onnxruntime", "--batch-sizes", "1,2", "--threads", "1", *QUICK)
    cli(
        "bench",
        str(out / MODEL / "pytorch"),
        "-b",
        "pytorch",
        "--batch-sizes",
        "1,2",
        "--threads",
        "1",
        *QUICK,
    )
    cli(
        "bench",
        str(onnx),
        "-b",
        "onnxruntime",
        "--scenario",
        "server",
        "--batch-sizes",
        "2",
        "--qps",
        "40,80",
        "--min-duration",
        "0.3",
        "--threads",
        "1",
        "--no-progress",
    )
    # A real unstable cell (no latency spread is below this) and a real failed one.
    cli(
        "bench",
        str(onnx),
        "-b",
        "onnxruntime",
        "--batch-sizes",
        "4",
        "--threads",
        "1",
        "--cv-threshold",
        "0.000001",
        *QUICK,
    )
    cli(
        "bench",
        str(onnx),
        "-b",
        "onnxruntime",
        "--batch-sizes",
        "8",
        "--threads",
        "1",
        "--timeout",
        "0.01",
        *QUICK,
        ok=(1,),
    )
    # Micro cells: a GEMM (the roofline's compute ceiling) and the streams (its bandwidth).
    micro = ("--threads", "1", "--min-duration", "0.05", "--warmup", "1", "-q")
    cli("micro", "gemm", "--shape", "64", "--engine", "numpy,onnxruntime", *micro)
    cli("micro", "gemm", "--shape", "64", "--engine", "onnxruntime", "--precision", "int8", *micro)
    cli("micro", "memory", "--shape", "1", "--engine", "numpy", *micro)
    return path


def _report(cli, db, *args):
    return cli("report", "--db", str(db), *args)


def _sections(text: str) -> dict[str, list[list[str]]]:
    """## heading -> its first Markdown table as rows of cells (header row first)."""
    out: dict[str, list[list[str]]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
        elif line.startswith("|") and current and (current not in out or out[current][-1]):
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            if not set("".join(cells)) <= {"-"}:
                out.setdefault(current, []).append(cells)
        elif current in out:
            out[current].append([])  # the table ended; later tables are other things
    return {k: [r for r in v if r] for k, v in out.items()}


def _as_dicts(rows):
    return [dict(zip(rows[0], r)) for r in rows[1:]]


def _value(cell: str) -> float:
    return float(cell.split()[0])


def _records(db, where):
    return ResultStore(db).records(where)


def _in_full(text: str, section: str, cell: str) -> str:
    """A cell as its reader gets it: a long text shortened to "WORD [n]" is note n under
    the section's table (``output.footnotes``), whitespace runs as one space."""
    marker = re.fullmatch(r".*\[(\d+)\]", cell)
    if not marker:
        return cell
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    (note,) = [ln for ln in body.splitlines() if ln.startswith(f"[{marker.group(1)}] ")]
    return note.split(" ", 1)[1]


# ---------------------------------------------------------------- Markdown tables


def test_markdown_tables_carry_the_database_figures(cli, db):
    out = _report(cli, db)
    assert out.returncode == 0, out.stderr
    sections = _sections(out.stdout)
    assert list(sections) == ["Training", "Inference", "Micro and layer benchmarks", "Conversion"]
    micro = _as_dicts(sections["Micro and layer benchmarks"])
    assert [(r["Op"], r["Engine"].split()[0]) for r in micro] == [
        ("gemm 64x64x64", "numpy"),
        ("gemm 64x64x64", "onnxruntime"),
        ("gemm 64x64x64", "onnxruntime"),
        ("copy 1MiB", "numpy"),
        ("triad 1MiB", "numpy"),
    ]
    for r, rec in zip(micro, _records(db, "kind='micro'")):
        assert r["Status"].startswith(rec["status"])
        m = rec["metrics"]
        if m["gflops"]:
            assert float(r["GFLOP/s"]) == pytest.approx(m["gflops"], rel=1e-3)
        assert float(r["GB/s"]) == pytest.approx(m["gbps"], rel=1e-3)

    # training: the registry's names, the record's throughput, 1 device -> "-"
    (train,) = _records(db, "kind='train'")
    spec = get_model(MODEL)
    (row,) = _as_dicts(sections["Training"])
    assert list(row) == [
        "Network",
        "Network type",
        "Dataset",
        "Framework version",
        "Resource",
        "Precision",
        "Batch size",
        "Throughput",
        "Speedup",
    ]
    assert (row["Network"], row["Network type"], row["Dataset"]) == (
        spec.display_name,
        spec.network_type,
        spec.dataset,
    )
    assert row["Framework version"] == f"PyTorch {train['framework_version']}"
    assert row["Resource"] == train["context"]["resource"]
    assert int(row["Batch size"]) == train["batch_size"] == 4
    # A loaded machine can push this tiny run's kernel share past 10 %, and the suite's
    # other worker can hold more than 10 % of its CPUs: then each is marked.
    m = train["metrics"]
    marks = (r" \(kernel \d+%\)" if m.get("kernel_bound") else "") + (
        r" \(others \d+%\)" if (m.get("contended_share") or 0) > 0.10 else ""
    )
    assert re.fullmatch(r"[\d.]+ images/sec" + marks, row["Throughput"]), row["Throughput"]
    assert _value(row["Throughput"]) == pytest.approx(train["throughput_sps"], rel=1e-3)
    assert row["Speedup"] == "-"

    # inference: every bench record is exactly one row, with its own figures
    bench = _records(db, "kind='bench'")
    rows = _as_dicts(sections["Inference"])
    assert len(rows) == len(bench) == 7
    pool = list(bench)
    for row in rows:
        failed = row["Throughput"].startswith("FAILED")
        match = [
            r
            for r in pool
            if (
                f"{r['backend']} {r['backend_version']}",
                r["precision"],
                r["batch_size"],
                r["scenario"],
                r["status"] == "failed",
            )
            == (row["Backend"], row["Precision"], int(row["Batch"]), row["Scenario"], failed)
            and (failed or _value(row["Throughput"]) == pytest.approx(r["throughput_sps"], rel=1e-3))
        ]
        assert len(match) == 1, (row, match)
        r = match[0]
        pool.remove(r)
        if failed:
            assert _in_full(out.stdout, "Inference", row["Throughput"]) == " ".join(
                f"FAILED: {r['error']}".split()
            )
            assert row["p50 / p99 latency"] == "" and row["% of peak"] == ""
            continue
        assert row["Throughput"].split()[1] == "images/sec"
        assert ("UNSTABLE" in row["Throughput"]) == (r["status"] == "unstable")
        p50 = row["p50 / p99 latency"].split(" / ")[0]
        assert _value(p50) == pytest.approx(r["metrics"]["latency_ms"]["p50"], rel=5e-3)
        pct = r["metrics"].get("percent_of_peak")
        assert row["% of peak"] == (
            "" if pct is None else f"INVALID: {pct:.1f}%†" if beyond_peak(pct) else f"{pct:.1f}%"
        )
        support = r["metrics"]["percentile_support"]
        assert [lat.endswith("*") for lat in row["p50 / p99 latency"].split(" / ")] == [
            not support["p50"],
            not support["p99"],
        ]
    assert pool == []
    assert any(row["% of peak"] for row in rows), "env --peak ran: some cell has a % of peak"
    # env --peak measured 2 threads (physical cores); the 1-thread cells measured their own.
    for r in bench:
        if r["metrics"].get("percent_of_peak") is not None:
            assert r["metrics"]["peak_threads"] == r["intra_op_threads"] == 1
    assert {r["status"] for r in bench} == {"ok", "unstable", "failed"}

    # conversion: one row per convert/verify record; figures from metrics.outputs
    conv = _records(db, "kind IN ('convert', 'verify')")
    rows = _as_dicts(sections["Conversion"])
    assert [row["Hop"] for row in rows] == [r["context"]["hop"] for r in conv]
    for row, r in zip(rows, conv):
        (o,) = r["metrics"]["outputs"].values()
        assert float(row["Max abs diff"]) == pytest.approx(o["max_abs"], rel=1e-2)
        assert float(row["Cosine"]) == pytest.approx(o["cosine"], abs=1e-6)
        assert _value(row["Top-1 agreement"].rstrip("%")) == pytest.approx(100 * o["top1"], abs=0.1)
        assert (row["Verdict"] == "ok") == (r["status"] == "ok")
        if r["status"] != "ok":
            assert row["Verdict"].startswith(r["status"].upper())
            assert _in_full(out.stdout, "Conversion", row["Verdict"]) == " ".join(
                f"{r['status'].upper()}: {r['error']}".split()
            )


def test_unverified_files_are_marked_even_when_judged_after_their_benchmark(cli, workdir):
    """A real wrong file (one weight scaled) is benchmarked, then found wrong by `dlbench
    verify`: the report looks its bytes up in the artifacts table and marks the row."""
    from tests.utils import tiny_onnx

    ref = tiny_onnx.save(tiny_onnx.classifier(), workdir / "ref.onnx")
    bad = tiny_onnx.save(tiny_onnx.scale_initializer(tiny_onnx.classifier(), "fc", 3.0), workdir / "bad.onnx")
    out = cli("bench", str(ref), str(bad), "-b", "onnxruntime", "--threads", "1", *QUICK)
    assert out.returncode == 0, out.stderr[-3000:]
    [before] = [
        r
        for r in _records(workdir / "results.sqlite", "kind='bench'")
        if r["context"]["artifact"]["path"].endswith("bad.onnx")
    ]
    assert before["context"]["artifact"]["verification"] is None  # not judged yet
    assert cli("verify", str(ref), str(bad)).returncode == 1
    [row] = ResultStore(workdir / "results.sqlite").artifacts("verified = 0")
    assert row["sha256"] == before["context"]["artifact"]["sha256"]
    text = report.render(ResultStore(workdir / "results.sqlite"))
    rows = {r["Artifact"]: r for r in _as_dicts(_sections(text)["Inference"])}
    assert set(rows) == {"onnx (ref.onnx)", "UNVERIFIED onnx (bad.onnx)"}
    assert UNVERIFIED in text
    html = report.render(ResultStore(workdir / "results.sqlite"), fmt="html")
    assert '<td class="bad">UNVERIFIED onnx (bad.onnx)</td>' in html


def test_above_100_percent_of_peak_is_flagged_not_printed_as_a_fact(db):
    """The rule on a copy of a real record whose share came out at 176.6 % (the symptom a
    1-thread cell showed against a 2-thread peak measured on a busy machine)."""
    first = next(r for r in _records(db, "kind='bench'") if r["status"] != "failed")
    above = copy.deepcopy(first)
    above["metrics"]["percent_of_peak"] = 176.6
    text = report.inference_table([first, above])
    cells = [r["% of peak"] for r in _as_dicts(_sections("## I\n" + text)["I"])]
    assert "INVALID: 176.6%†" in cells
    assert not any(c.startswith("176") for c in cells)
    assert ABOVE_PEAK in text
    assert ABOVE_PEAK not in report.inference_table([first])


def test_every_table_names_its_machine_and_library_versions(cli, db):
    out = _report(cli, db)
    fp = ResultStore(db).machine(_records(db, "1=1")[0]["machine_id"])
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("Measured on machine")]
    assert len(lines) == 4  # one machine, four tables
    for line in lines:
        assert fp["machine_id"] in line and fp["cpu"]["model"] in line
        assert f"{fp['cpu']['physical_cores']} physical" in line
        assert f"{fp['memory_gib']} GiB" in line
        for name, version in fp["versions"].items():
            assert f"{name} {version}" in line
    assert "Server scenario" in out.stdout and "Achieved QPS" in out.stdout


def test_speedup_eval_columns_and_machines_from_derived_records(db):
    """Scaling efficiency and eval columns need multi-device runs this machine cannot make:
    they are checked on copies of the real record with the device count and eval added."""
    (one,) = _records(db, "kind='train'")
    eight = copy.deepcopy(one)
    eight.update(id=one["id"] + 1000, throughput_sps=one["throughput_sps"] * 8 * 0.95)
    eight["context"]["config"]["devices"] = 8
    for r, (loss, acc) in ((one, (2.5, 0.125)), (eight, (2.25, 0.5))):
        r["metrics"]["eval"] = {"loss": loss, "accuracy": acc}
    rows = _as_dicts(_sections("## T\n" + report.training_table([eight, one]))["T"])
    assert [r["Speedup"] for r in rows] == ["-", "0.95"]
    assert [(r["Loss"], r["Acc"]) for r in rows] == [("2.500", "12.5%"), ("2.250", "50.0%")]
    assert rows[1]["Network"] == ""  # the seed prints a group's name once
    assert _value(rows[1]["Throughput"]) == pytest.approx(eight["throughput_sps"], rel=1e-3)

    lonely = copy.deepcopy(eight)
    lonely["precision"] = "amp"
    (row,) = _as_dicts(_sections("## T\n" + report.training_table([lonely]))["T"])
    assert row["Speedup"].startswith("n/a") and row["Precision"] == "Mixed"

    # Any measured cell (a loaded machine may flag one unstable); the copy differs only in
    # its machine and a later id, so the table's order is fixed whatever the figures.
    first = next(r for r in _records(db, "kind='bench'") if r["status"] != "failed")
    bench = [first]
    other = copy.deepcopy(first)
    other.update(id=first["id"] + 10_000, machine_id="feedfacefeedface")
    text = report.inference_table([bench[0], other])
    rows = _as_dicts(_sections("## I\n" + text)["I"])
    assert [r["Machine"] for r in rows] == [bench[0]["machine_id"], "feedfacefeedface"]
    assert "machine feedfacefeedface (fingerprint not stored)" in text


# ---------------------------------------------------------------- selection


def test_run_latest_and_model_select_records(cli, db, tmp_path):
    runs = [r["run_id"] for r in _records(db, "kind IN ('bench', 'micro')")]
    first, last = runs[0], runs[-1]  # the last: the micro memory run
    out = _report(cli, db, "--run", first, "--format", "json")
    assert out.returncode == 0, out.stderr
    assert {r["run_id"] for r in json.loads(out.stdout)} == {first}
    out = _report(cli, db, "--latest", "--format", "json")
    assert {r["run_id"] for r in json.loads(out.stdout)} == {last}
    out = _report(cli, db, "--run", first, "--run", last, "--latest", "--format", "json")
    assert {r["run_id"] for r in json.loads(out.stdout)} == {last}
    out = _report(cli, db, "--model", MODEL, "--out", str(tmp_path / "r.csv"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "r.csv").read_text().startswith("id,run_id,kind,")  # format from suffix


# ---------------------------------------------------------------- CSV / JSON


def test_json_is_the_records_as_stored(cli, db):
    out = _report(cli, db, "--format", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == _records(db, "kind != 'peak'")


def test_csv_has_one_flat_row_per_record(cli, db, tmp_path):
    dest = tmp_path / "sub" / "report.csv"
    out = _report(cli, db, "--format", "csv", "--out", str(dest))
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(dest.read_text())))
    stored = _records(db, "kind != 'peak'")
    assert [int(r["id"]) for r in rows] == [r["id"] for r in stored]
    for row, r in zip(rows, stored):
        assert row["kind"] == r["kind"] and row["status"] == r["status"]
        if r["throughput_sps"] is not None:
            assert float(row["throughput_sps"]) == r["throughput_sps"]
        lat = r["metrics"].get("latency_ms")
        if lat:
            assert float(row["latency_p50_ms"]) == lat["p50"]
            assert float(row["latency_p99_ms"]) == lat["p99"]
        if r["kind"] in ("convert", "verify"):
            outs = r["metrics"]["outputs"].values()
            assert float(row["cosine"]) == min(o["cosine"] for o in outs)
    assert not list(dest.parent.glob(".*")), "the temporary file was renamed, not left"


# ---------------------------------------------------------------- HTML


def _svgs(html: str) -> list[bytes]:
    return [
        base64.b64decode(m, validate=True)
        for m in re.findall(r'<img [^>]*src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', html)
    ]


def _svg_root(data: bytes):
    import xml.etree.ElementTree as ET

    return ET.fromstring(data)


SVG = "{http://www.w3.org/2000/svg}"


def test_html_is_one_self_contained_file_with_five_charts(cli, db, tmp_path):
    dest = tmp_path / "report.html"
    out = _report(cli, db, "--out", str(dest))
    assert out.returncode == 0, out.stderr
    html = dest.read_text()
    svgs = _svgs(html)
    assert len(svgs) == html.count("<img ") == 5  # the roofline from the micro cells
    for data in svgs:
        root = _svg_root(data)
        assert root.tag == f"{SVG}svg"
        # In points: a chart at least 5.5 by 2 inches (the smallest, a bar chart of two bars).
        width, height = (float(root.get(side).removesuffix("pt")) for side in ("width", "height"))
        assert width >= 400 and height >= 144, (width, height)
        assert len(root.findall(f".//{SVG}path")) > 10  # drawn, not blank
        assert root.findall(f".//{SVG}text")  # the labels are text, not glyph outlines
    assert not re.search(r'(src|href)="(?!data:)', html), "no external resources"
    assert "<link" not in html and "@import" not in html and "url(" not in html
    for title in ("Training", "Inference", "Micro and layer benchmarks", "Conversion"):
        assert f"<h2>{title}</h2>" in html
    bench = _records(db, "kind='bench' AND status='failed'")
    assert html_lib.escape(" ".join(f"FAILED: {bench[0]['error']}".split())) in html


def test_the_roofline_has_a_ceiling_per_device_and_precision(db):
    from dlbench.harness.report.roofline import ceilings

    micro = ResultStore(str(db)).records("kind = 'micro' AND status != 'failed'", [])
    roofs = ceilings(micro)
    assert set(roofs) == {("cpu", "fp32"), ("cpu", "int8")}
    best = {
        p: max(
            r["metrics"]["gflops"]
            for r in micro
            if r["precision"] == p and r["context"]["op"]["kind"] == "gemm"
        )
        for p in ("fp32", "int8")
    }
    stream = max(r["metrics"]["gbps"] for r in micro if r["context"]["op"]["kind"] == "memory")
    assert roofs == {("cpu", p): (best[p], stream) for p in ("fp32", "int8")}
    # A device without a memory stream has no ceiling: none is borrowed from another.
    elsewhere = [dict(r, device="cuda") for r in micro if r["context"]["op"]["kind"] == "gemm"]
    assert set(ceilings(micro + elsewhere)) == set(roofs)


def test_onnx_bench_cells_join_the_roofline_by_their_compulsory_traffic(db):
    """A bench cell of a counted graph: FLOPs over weights (once a batch), inputs and
    outputs; a native cell has no graph count and is left out."""
    import onnx

    from dlbench.harness.report.roofline import _model_point, roofline

    store = ResultStore(str(db))
    # A measured cell, stable or not: two workers on two cores may make one noisy.
    measured = "kind = 'bench' AND status IN ('ok', 'unstable')"
    ort = store.records(f"{measured} AND backend = 'onnxruntime' AND batch_size = 2", [])[0]
    native = store.records(f"{measured} AND backend = 'pytorch'", [])[0]
    model = onnx.load(ort["model_path"] if "model_path" in ort else ort["context"]["artifact"]["path"])
    weights = sum(onnx.numpy_helper.to_array(t).nbytes for t in model.graph.initializer)
    flops = ort["metrics"]["flops"]
    assert flops["weight_bytes"] == weights
    assert flops["io_bytes_per_sample"] == 4 * (3 * 64 * 64 + 10)  # an image, 10 logits
    x, y = _model_point(ort)  # at batch 2: the weights read once
    per_sample = weights / 2 + 4 * (3 * 64 * 64 + 10)
    assert x == pytest.approx(ort["metrics"]["gflops_per_sample"] * 1e9 / per_sample)
    assert y == ort["metrics"]["achieved_gflops"]
    assert _model_point(native) is None
    (chart,) = roofline(store.records("1 = 1", []))
    assert "Model cells (triangles)" in chart.note


def test_html_skips_charts_without_data_with_a_note(cli, db, tmp_path):
    export_run = _records(db, "kind='convert'")[0]["run_id"]
    out = _report(cli, db, "--run", export_run, "--format", "html")
    assert out.returncode == 0, out.stderr
    assert _svgs(out.stdout) == []
    assert out.stdout.count("Skipped: ") == 5
    assert "<h2>Conversion</h2>" in out.stdout and "<h2>Inference</h2>" not in out.stdout


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "case", ["missing", "empty", "not-sqlite", "run", "model", "format", "out-under-file", "out-is-dir"]
)
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(cli, db, tmp_path, case):
    dest = tmp_path / "report.md"
    target, args, needle = db, ["--out", str(dest)], None
    if case == "missing":
        target, needle = tmp_path / "nothing.sqlite", "does not exist"
    elif case == "empty":
        target, needle = tmp_path / "empty.sqlite", "has no records"
        target.write_bytes(b"")
    elif case == "not-sqlite":
        target, needle = tmp_path / "text.sqlite", "not a dlbench results database"
        target.write_text("hello\n" * 100)
    elif case == "run":
        bogus = "20000101T000000Z-000000"
        args, needle = args + ["--run", bogus], f"no run '{bogus}'"
    elif case == "model":
        args, needle = args + ["--model", "nosuchnet"], "no records of model 'nosuchnet'"
    elif case == "format":
        args, needle = args + ["--format", "pdf"], "unknown report format 'pdf'"
    elif case == "out-under-file":
        (tmp_path / "file").write_text("x")
        dest = tmp_path / "file" / "report.md"
        args, needle = ["--out", str(dest)], "cannot write"
    elif case == "out-is-dir":
        dest = tmp_path
        args, needle = ["--out", str(dest)], "it is a directory"
    before = sorted(p.name for p in tmp_path.iterdir())
    size = target.stat().st_size if target.exists() else None
    out = cli("report", "--db", str(target), *args)
    assert_usage_error(out, needle)
    assert out.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "nothing created"
    assert (target.stat().st_size if target.exists() else None) == size, "database untouched"


def test_report_opens_the_database_read_only(db, tmp_path):
    """A report never writes: the database's bytes are the same after it."""
    before = db.read_bytes()
    text = report.render(ResultStore(db), fmt="md")
    assert "## Inference" in text
    assert db.read_bytes() == before
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM records").fetchone()[0] > 0


def test_number_format_keeps_four_significant_digits():
    assert [tables.num(x) for x in (13689.4, 1787.0, 251.48, 5.3931, 0.0123456)] == [
        "13689",
        "1787",
        "251.5",
        "5.393",
        "0.01235",
    ]


def test_shared_cell_formats_are_one_helper_each():
    from dlbench.harness.output.tables import artifact_label, milliseconds, network_name

    assert network_name(MODEL) == get_model(MODEL).display_name
    assert network_name("my-model.onnx") == "my-model.onnx" and network_name(None) is None
    assert [milliseconds(x) for x in (None, 8.314, 1234.0)] == ["-", "8.31 ms", "1.23 s"]
    rec = {"framework": "pytorch", "context": {"artifact": {"format": "onnx", "path": "/runs/m/model.onnx"}}}
    assert artifact_label(rec) == "onnx from pytorch (model.onnx)"
    assert artifact_label({"context": {"artifact": {"format": "zoo"}}}) == "zoo, random weights"


def test_report_modules_do_not_import_back_from_their_package():
    """The package imports its modules; a module that imported names back from the package
    would close a circle."""
    import ast
    from pathlib import Path

    folder = Path(report.__file__).parent
    for path in folder.glob("*.py"):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "dlbench.harness.report", f"{path.name}:{node.lineno}"


def test_markdown_cells_keep_their_row_and_column():
    from dlbench.harness.output.tables import markdown

    text = markdown(("model", "error"), [["a|b", "first line\nsecond line"]])
    rows = text.splitlines()
    assert len(rows) == 3 and rows[2].count(" | ") == 1
    assert "a\\|b" in rows[2] and "first line second line" in rows[2]


def test_a_model_named_in_cjk_is_drawn_by_the_browser_not_as_boxes(cli, workdir):
    """matplotlib's fonts have no CJK glyphs: as outlines, such names were empty boxes."""
    from tests.utils import tiny_onnx

    for name in ("模型", "모델"):
        tiny_onnx.save(tiny_onnx.mlp(), workdir / f"{name}.onnx")
    models = ("模型.onnx", "모델.onnx")
    out = cli("bench", *models, "-b", "onnxruntime", "--batch-sizes", "1,2", "--iterations=3")
    assert out.returncode == 0, out.stderr[-2000:]
    out = cli("report", "--db", "results.sqlite", "--format", "html")
    assert out.returncode == 0 and "Glyph" not in out.stderr, out.stderr[-2000:]
    texts = ["".join(t.itertext()) for data in _svgs(out.stdout) for t in _svg_root(data).iter(f"{SVG}text")]
    for name in ("模型", "모델"):
        assert any(name in t for t in texts), texts
