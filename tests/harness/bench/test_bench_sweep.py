"""``dlbench bench`` end to end through the real CLI: ONNX Runtime cells, records, failures,
resume, noise flags, scenarios and every bad input."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.utils import benchmodels
from tests.utils.clitools import assert_usage_error as _one_line_error

FAST = ("--min-duration", "0.2", "--min-iterations", "5", "--warmup", "2", "--max-warmup", "10")
KEYS = {
    "backend",
    "device",
    "precision",
    "batch_size",
    "scenario",
    "status",
    "error",
    "throughput_sps",
    "latency_ms",
    "cv",
    "iterations",
    "warmup_iterations",
    "gflops_per_sample",
    "threads",
    "model",
    "model_path",
}


def _rows(workdir, where="1=1"):
    con = sqlite3.connect(workdir / "results.sqlite")
    con.row_factory = sqlite3.Row
    return con.execute(f"SELECT * FROM records WHERE {where} ORDER BY id").fetchall()


@pytest.fixture
def mlp(workdir):
    return benchmodels.mlp(workdir / "mlp.onnx")


def test_onnxruntime_sweep_records_every_cell_with_its_context(cli, workdir, mlp):
    out = cli(
        "bench",
        str(mlp),
        "--backend",
        "onnxruntime",
        "--batch-sizes",
        "1,4",
        "--threads",
        "1,2",
        *FAST,
        "--cv-threshold",
        "100",
        "--json",
        "b.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    records = json.loads((workdir / "b.json").read_text())
    assert [(r["batch_size"], r["threads"]["intra_op"]) for r in records] == [(1, 1), (1, 2), (4, 1), (4, 2)]
    for r in records:
        assert KEYS <= set(r), KEYS - set(r)
        m = r["metrics"]
        assert r["status"] == "ok" and r["error"] is None
        assert r["backend"] == "onnxruntime" and r["device"] == "cpu" and r["precision"] == "fp32"
        assert r["scenario"] == "offline" and r["model"] == "mlp" and r["model_path"] == str(mlp)
        # throughput is the window's, and the latency summary is the raw samples'
        assert r["throughput_sps"] * m["window_s"] == pytest.approx(r["iterations"] * r["batch_size"])
        assert r["iterations"] >= 5 and m["window_s"] >= 0.2 and r["warmup_iterations"] >= 2
        lat = r["latency_ms"]
        assert set(lat) == {"mean", "p50", "p90", "p95", "p99", "min", "max", "std"}
        assert lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"] <= lat["max"]
        assert len(m["latency_samples_ms"]) * m["latency_samples_stride"] >= r["iterations"]
        assert r["gflops_per_sample"] == pytest.approx(2 * 64 * 32 / 1e9)
        assert m["achieved_gflops"] == pytest.approx(r["gflops_per_sample"] * r["throughput_sps"])
        cold = m["cold_start"]
        assert cold["load_s"] > 0 and cold["first_inference_ms"] > 0
        assert r["peak_rss_mb"] > 20
        c = r["context"]
        assert c["runtime"]["providers"] == ["CPUExecutionProvider"]
        assert c["runtime"]["intra_op_threads"] == r["threads"]["intra_op"]
        assert c["timed_region"]["definition"].startswith("from the start of the backend's run")
        assert c["timed_region"]["host_device_copies"] is False
        assert c["thread_environment"]["OMP_NUM_THREADS"] == str(r["threads"]["intra_op"])
        assert c["inputs"] == [
            {"name": "x", "dtype": "float32", "shape": [r["batch_size"], 64], "fill": "normal"}
        ]
    rows = _rows(workdir)
    assert [row["id"] for row in rows] == [r["id"] for r in records]
    for row, r in zip(rows, records):
        assert row["kind"] == "bench" and row["status"] == "ok" and row["backend"] == "onnxruntime"
        assert row["backend_version"] == r["backend_version"] and row["scenario"] == "offline"
        assert row["iterations"] == r["iterations"] and row["throughput_sps"] == r["throughput_sps"]
        assert json.loads(row["metrics"])["latency_ms"] == r["latency_ms"]
    assert "onnxruntime" in out.stdout and "Throughput" in out.stdout


def test_a_refused_cell_ends_the_command_after_the_sweeps_other_cells(cli, workdir, mlp):
    """A backend that finds one cell's request unsatisfiable refuses that cell: the other
    cells run and are stored, as train's do, and the command then exits 2 with the
    refusal as its one line.  Every cell refused: nothing is written."""
    base = ("bench", str(mlp), "-b", "selftest", "-O", "fail=refuse", "-q", *FAST)
    out = cli(*base, "--batch-sizes", "1,2,4", "-O", "fail_batch=2", "--json", "some.json")
    _one_line_error(out, "selftest: refused batch 2")
    records = json.loads((workdir / "some.json").read_text())
    # measured: "unstable" is a measured cell's verdict on a busy machine, not a failure
    assert [(r["batch_size"], r["status"] in ("ok", "unstable")) for r in records] == [(1, True), (4, True)]
    assert "| 4 " in out.stdout  # the table of what ran, before the refusal
    out = cli(*base, "--batch-sizes", "1,2", "--json", "none.json")
    _one_line_error(out, "selftest: refused batch 1", "selftest: refused batch 2")
    assert not (workdir / "none.json").exists()


def test_a_crashing_and_a_hanging_cell_fail_while_the_sweep_goes_on(cli, workdir, mlp):
    out = cli(
        "bench",
        str(mlp),
        "-b",
        "selftest",
        "--batch-sizes",
        "1,2,4",
        "-O",
        "fail=raise",
        "-O",
        "fail_batch=2",
        *FAST,
        "--json",
        "raise.json",
    )
    assert out.returncode == 1
    records = json.loads((workdir / "raise.json").read_text())
    assert [r["status"] != "failed" for r in records] == [True, False, True]
    failed = records[1]
    assert failed["error"] == "RuntimeError: selftest: raised inside run at batch 2"
    assert "Traceback" in failed["context"]["traceback"] and failed["throughput_sps"] is None

    t0 = time.monotonic()
    out = cli(
        "bench",
        str(mlp),
        "-b",
        "selftest",
        "--batch-sizes",
        "1,2,4",
        "-O",
        "fail=hang",
        "-O",
        "fail_batch=2",
        "--timeout",
        "4",
        *FAST,
        "--json",
        "hang.json",
    )
    assert out.returncode == 1 and time.monotonic() - t0 < 60
    records = json.loads((workdir / "hang.json").read_text())
    assert [r["status"] == "failed" for r in records] == [False, True, False]
    # The step it hung in: the hang is in the backend's run, first called on its first batch.
    assert records[1]["error"] == (
        "timed out after 4 s (the cell was killed while running the first batch (batch size 2))"
    )
    assert [row["status"] for row in _rows(workdir, "batch_size = 2")] == ["failed", "failed"]


def test_a_backend_that_fell_back_fails_the_cell(cli, workdir, mlp):
    out = cli("bench", str(mlp), "-b", "selftest", "-O", "fail=fallback", *FAST, "--json", "f.json")
    assert out.returncode == 1
    [r] = json.loads((workdir / "f.json").read_text())
    assert r["status"] == "failed" and r["error"].startswith("FellBack: asked for cpu")


def test_resume_skips_finished_cells_and_retries_failed_ones(cli, workdir, mlp):
    args = ("bench", str(mlp), "-b", "selftest", *FAST)
    first = cli(*args, "--batch-sizes", "1,2", "-O", "fail=raise", "-O", "fail_batch=2")
    assert first.returncode == 1
    out = cli(
        *args,
        "--batch-sizes",
        "1,2,4",
        "-O",
        "fail=raise",
        "-O",
        "fail_batch=2",
        "--resume",
        "--json",
        "r.json",
    )
    records = json.loads((workdir / "r.json").read_text())
    assert [(r["batch_size"], r.get("resumed", False)) for r in records] == [
        (1, True),
        (2, False),
        (4, False),
    ]
    assert "1 of 3 cells already" in out.stderr
    # batch 1 ran once, batch 2 twice (failed cells are retried), batch 4 once
    assert [row["batch_size"] for row in _rows(workdir)] == [1, 2, 2, 4]
    # a different measurement setup is a different cell: nothing is skipped
    out = cli(
        "bench",
        str(mlp),
        "-b",
        "selftest",
        "--min-duration",
        "0.3",
        "--min-iterations",
        "5",
        "--batch-sizes",
        "1",
        "--resume",
    )
    assert out.returncode == 0 and "already" not in out.stderr
    assert len(_rows(workdir)) == 5


def test_an_interrupted_sweep_leaves_complete_records_and_resumes(workdir, mlp):
    args = [
        sys.executable,
        "-m",
        "dlbench.harness",
        "bench",
        str(mlp),
        "-b",
        "selftest",
        "-O",
        "service_ms=20",
        "--batch-sizes",
        "1,2,3",
        "--min-duration",
        "1.5",
        "--warmup",
        "1",
        "--json",
        "i.json",
        "--no-progress",
    ]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (workdir / "i.json").exists():
        time.sleep(0.1)
    time.sleep(0.5)  # the second cell is running now
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)  # a supervisor repeating itself, mid-cleanup
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "Traceback" not in err and "Exception ignored" not in err, err[-2000:]
    done = json.loads((workdir / "i.json").read_text())
    assert [r["batch_size"] for r in done] == [1]
    assert not list(workdir.glob(".i.json*"))  # no half-written file left
    out = subprocess.run(args + ["--resume"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    records = json.loads((workdir / "i.json").read_text())
    assert [(r["batch_size"], r.get("resumed", False)) for r in records] == [
        (1, True),
        (2, False),
        (3, False),
    ]


def test_noisy_cells_are_flagged_unstable_and_repeats_report_their_spread(cli, workdir, mlp):
    out = cli(
        "bench",
        str(mlp),
        "-b",
        "selftest",
        "-O",
        "service_ms=2",
        "-O",
        "jitter=0.9",
        "--cv-threshold",
        "0.05",
        *FAST,
        "--json",
        "u.json",
    )
    assert out.returncode == 0
    [r] = json.loads((workdir / "u.json").read_text())
    assert r["status"] == "unstable" and r["cv"] > 0.05 and r["metrics"]["unstable"] is True
    assert "unstable" in out.stdout and _rows(workdir)[0]["status"] == "unstable"

    out = cli(
        "bench",
        str(mlp),
        "-b",
        "selftest",
        "-O",
        "service_ms=1",
        "--repeats",
        "3",
        *FAST,
        "--json",
        "rep.json",
    )
    [r] = json.loads((workdir / "rep.json").read_text())
    reps = [x["throughput_sps"] for x in r["metrics"]["repeats"]]
    assert len(reps) == 3 and r["throughput_sps"] == sorted(reps)[1]
    spread = r["metrics"]["repeat_spread"]
    assert spread["median_sps"] == r["throughput_sps"] and spread["mad_over_median"] >= 0


def test_scenarios_single_stream_and_server_on_onnxruntime(cli, workdir, mlp):
    out = cli(
        "bench",
        str(mlp),
        "-b",
        "onnxruntime",
        "--batch-sizes",
        "1,8",
        "--scenario",
        "single-stream,server",
        "--qps",
        "200",
        "--max-wait-ms",
        "1",
        *FAST,
        "--json",
        "s.json",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    records = json.loads((workdir / "s.json").read_text())
    assert [(r["scenario"], r["batch_size"]) for r in records] == [
        ("single-stream", 1),
        ("server", 1),
        ("server", 8),
    ]
    for r in records[1:]:
        [point] = r["metrics"]["server"]["points"]
        assert point["target_qps"] == 200 and point["queries"] >= 40
        assert point["achieved_qps"] == pytest.approx(200, rel=0.5)
        assert r["throughput_sps"] == point["achieved_qps"]
        assert r["latency_ms"] == point["latency_ms"] and r["status"] == "ok"
    assert "latency-throughput points" in out.stdout


def test_a_fixed_batch_model_runs_its_batch_only(cli, workdir):
    path = benchmodels.mlp(workdir / "fixed.onnx", batch=3)
    out = cli("bench", str(path), "-b", "onnxruntime", "--batch-sizes", "1,8", *FAST, "--json", "f.json")
    assert out.returncode == 0
    assert [r["batch_size"] for r in json.loads((workdir / "f.json").read_text())] == [3]
    assert "batch dimension is fixed at 3" in out.stderr


def test_any_onnx_model_with_tokens_and_dynamic_dims(cli, workdir):
    embed = benchmodels.embedding(workdir / "embed.onnx")
    half = benchmodels.half(workdir / "half.onnx")
    anysize = benchmodels.image_any_size(workdir / "any.onnx")
    out = cli(
        "bench",
        str(embed),
        str(anysize),
        "-b",
        "onnxruntime",
        "--shape",
        "input_ids=1x16",
        "--shape",
        "x=1x3x20x24",
        *FAST,
        "--json",
        "a.json",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    records = {r["model"]: r for r in json.loads((workdir / "a.json").read_text())}
    # a --shape must fit every artifact that has the input it names
    out = cli("bench", str(half), str(anysize), "-b", "onnxruntime", "--shape", "x=1x3x20x24")
    _one_line_error(out, "half.onnx: --shape x: 4 dimensions given, but input 'x' has 2")
    out = cli("bench", str(half), "-b", "onnxruntime", *FAST, "--json", "h.json")
    [r] = json.loads((workdir / "h.json").read_text())
    assert r["precision"] == "fp16" and r["context"]["inputs"][0]["dtype"] == "float16"
    fills = {i["name"]: i for i in records["embed"]["context"]["inputs"]}
    assert fills["input_ids"]["range"] == [0, benchmodels.VOCAB]
    assert fills["attention_mask"]["fill"] == "ones" and fills["input_ids"]["shape"] == [1, 16]
    assert records["any"]["context"]["inputs"][0]["shape"] == [1, 3, 20, 24]


def test_percent_of_peak_comes_from_env_peak(cli, workdir, mlp):
    out = cli("env", "--peak", "--peak-seconds", "0.3", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    peaks = {p["precision"]: p for p in json.loads(out.stdout)["peak"]}
    # One ceiling per precision micro has a CPU GEMM for, each the best library's, not the
    # first one tried.
    for precision, expected in (
        ("fp32", {"numpy", "onnxruntime", "torch"}),
        ("bf16", {"torch"}),
        ("int8", {"onnxruntime", "torch"}),
    ):
        p = peaks[precision]
        assert p["device"] == "cpu" and p["gflops"] > 0.5
        libraries = {c["library"].split()[0]: c["gflops"] for c in p["candidates"]}
        assert set(libraries) == expected, (precision, libraries)
        assert p["gflops"] == max(libraries.values())
    peak = peaks["fp32"]
    out = cli("bench", str(mlp), "-b", "onnxruntime", *FAST, "--json", "p.json")
    [r] = json.loads((workdir / "p.json").read_text())
    m = r["metrics"]
    assert m["peak_gflops"] == pytest.approx(peak["gflops"])
    assert m["percent_of_peak"] == pytest.approx(100 * m["achieved_gflops"] / peak["gflops"])


def test_backends_not_available_here_say_why(cli, workdir, mlp):
    rows = {r["name"]: r for r in json.loads(cli("backends", "--json").stdout)}
    for name in ("tensorrt", "ascend"):
        if rows[name]["available"]:
            continue
        out = cli("bench", str(mlp) if name == "tensorrt" else "resnet50-mini", "-b", name)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
        assert f"backend {name} is not available here: {rows[name]['reason']}" in out.stderr


def test_a_model_the_engine_refuses_is_bad_input_too(cli, workdir, mlp):
    """An IR version no ONNX Runtime release reads: exit 2, one line, before any cell (the
    structural check build and verify make says so first; the cell's refusal would too).

    (Not 14: whether that loads depends on the onnxruntime release, and 1.32 reads it.)"""
    import onnx

    model = onnx.load(str(mlp))
    model.ir_version = 10_000
    onnx.save(model, str(workdir / "ir14.onnx"))
    _one_line_error(
        cli("bench", "ir14.onnx", "-b", "onnxruntime", "--json", "x.json"),
        "ir14.onnx: not a valid ONNX model",
        "ir_version 10000",
    )
    assert not (workdir / "x.json").exists()


@pytest.mark.parametrize(
    "args,needles",
    [
        (
            ["corrupt.onnx", "-b", "onnxruntime"],
            ["corrupt.onnx: not a readable ONNX model, the file is corrupt or truncated"],
        ),
        (["unknown_op.onnx", "-b", "onnxruntime"], ["unknown operator 'FrobnicateTensor'"]),
        (["any.onnx", "-b", "onnxruntime"], ["dynamic dimension 2 ('height')", "--shape x="]),
        (
            ["any.onnx", "-b", "onnxruntime", "--shape", "x=1x20x24"],
            ["3 dimensions given, but input 'x' has 4"],
        ),
        (["mlp.onnx", "-b", "onnxruntime", "--batch-sizes", "0"], ["--batch-sizes must be positive"]),
        (["mlp.onnx", "-b", "onnxruntime", "--batch-sizes", "1,x"], ["'x' is not an integer"]),
        (["mlp.onnx", "-b", "tensorflowlite"], ["unknown backend 'tensorflowlite'"]),
        (["mlp.onnx", "-b", "onnxruntime", "--device", "cuda"], ["--device cuda"]),
        (["mlp.onnx", "-b", "onnxruntime", "--device", "tpu"], ["--device must be one of"]),
        (["mlp.onnx", "-b", "onnxruntime", "--precision", "fp16"], ["is an fp32 model"]),
        (["mlp.onnx", "-b", "pytorch"], ["none of pytorch takes one"]),
        (["mlp.onnx", "-b", "onnxruntime", "--onednn", "off"], ["option 'onednn' applies to none"]),
        (["mlp.onnx", "-b", "onnxruntime", "-O", "graph_optimization=max"], ["is not one of"]),
        (["mlp.onnx", "-b", "onnxruntime", "--shape", "y=1x3"], ["no artifact has an input 'y'"]),
        (["mlp.onnx", "-b", "onnxruntime", "--min-iterations", "0"], ["--min-iterations must be"]),
        (["mlp.onnx", "-b", "onnxruntime", "--qps", "10"], ["apply to --scenario server"]),
        (["nothing.onnx", "-b", "onnxruntime"], ["nothing.onnx: no such file"]),
        (["mlp.onnx", "-b", "onnxruntime", "--json", "afile/x.json"], ["cannot write"]),
        (["mlp.onnx", "-b", "onnxruntime", "--db", "afile"], ["not a dlbench results database"]),
        (["resnet50-mini", "-b", "pytorch", "--precision", "int8"], ["--precision int8: pytorch"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2_and_writes_nothing(cli, workdir, args, needles):
    benchmodels.mlp(workdir / "mlp.onnx")
    benchmodels.image_any_size(workdir / "any.onnx")
    benchmodels.unknown_op(workdir / "unknown_op.onnx")
    (workdir / "corrupt.onnx").write_bytes(b"\x08\x07 not protobuf \xff\xff\xff")
    (workdir / "afile").write_text("not a directory, not a database")
    before = sorted(p.name for p in workdir.iterdir())
    _one_line_error(
        cli("bench", *args, "--json", "out.json") if "--json" not in args else cli("bench", *args), *needles
    )
    assert sorted(p.name for p in workdir.iterdir()) == before


@pytest.fixture
def signatures(workdir):
    """Signatures met in the wild: PP-OCR's [None, 3, ?, ?] and a scalar sample rate."""
    import numpy as np

    from tests.utils import tiny_onnx

    tiny_onnx.save(tiny_onnx.ocr_classifier(), workdir / "cls.onnx")
    tiny_onnx.save(tiny_onnx.sample_rate(), workdir / "sr.onnx")
    np.save(workdir / "sr.npy", np.array(tiny_onnx.SAMPLE_RATE, np.int64))
    np.save(workdir / "x.npy", np.ones((1, 64), np.float32))
    return workdir


@pytest.mark.parametrize(
    "inputs,shapes",
    [
        (["cls.onnx", "--shape", "x=1x3x48x192"], [[2, 3, 48, 192]]),
        (["cls.onnx", "--shapes=x:1x3x48x192"], [[2, 3, 48, 192]]),
        # the graph fails unless sr == 16000 reaches it: zeros (the default) would fail the cell
        (["sr.onnx", "--shape", "x=1x64", "--input", "sr=16000"], [[2, 64], []]),
        # files: sr.npy holds 16000, x.npy (1x64) sets the samples and is repeated to the batch
        (["sr.onnx", "--input", "sr=sr.npy", "--input", "x=x.npy"], [[2, 64], []]),
    ],
)
def test_any_signature_runs_through_the_cli(cli, signatures, inputs, shapes):
    out = cli("bench", *inputs, "-b", "onnxruntime", "--batch-sizes", "2", *FAST, "-q", "--json", "b.json")
    assert out.returncode == 0, out.stderr[-3000:]
    [r] = json.loads((signatures / "b.json").read_text())
    assert r["status"] in ("ok", "unstable"), r["error"]  # it ran; noise is not the point
    planned = r["context"]["inputs"]
    assert [i["shape"] for i in planned] == shapes
    if "sr.onnx" in inputs:
        sr = planned[1]
        if "sr=16000" in inputs:
            assert sr["fill"] == "value" and sr["value"] == 16000
        else:
            x = planned[0]
            assert sr["fill"] == "file" and sr["file"] == str(signatures / "sr.npy")
            assert len(sr["sha256"]) == 64 and x["rows"] == "its 1 row repeated to batch 2"
            assert r["context"]["identity"]["inputs"]["x"]["shape"] == [1, 64]


def test_input_options_come_from_a_config_file_too(cli, signatures):
    (signatures / "c.toml").write_text('shapes = ["x:1x64"]\ninput = ["sr=sr.npy"]\n')
    out = cli("bench", "sr.onnx", "-b", "onnxruntime", "--config", "c.toml", "--print-config")
    assert out.returncode == 0, out.stderr[-2000:]
    assert 'shapes = ["x:1x64"]' in out.stdout and 'input = ["sr=sr.npy"]' in out.stdout
    (signatures / "c.toml").write_text('input = ["sr=16000.5"]\nshape = ["x=1x64"]\n')
    _one_line_error(
        cli("bench", "sr.onnx", "-b", "onnxruntime", "--config", "c.toml"),
        "--input sr=16000.5: input 'sr' is int64; the value must be an integer",
    )


@pytest.mark.parametrize(
    "args,needles",
    [
        (
            ["cls.onnx"],
            ["dynamic dimension 2: give its size with --shape x=1x3x?x?", "; inputs: x [?, 3, ?, ?] float32"],
        ),
        (["cls.onnx", "--shapes", "x"], ["--shapes 'x': expected NAME:DIMxDIM"]),
        (["cls.onnx", "--shape", "x=1x3x48x192", "--shapes=x:1x3x32x32"], ["given twice"]),
        (["sr.onnx", "--shape", "x=1x64", "--input", "sr"], ["--input 'sr': expected NAME=VALUE"]),
        (
            ["sr.onnx", "--shape", "x=1x64", "--input", "sr=99999999999999999999"],
            ["does not fit int64", "; inputs: x [batch, samples] float32, sr [] int64"],
        ),
        (
            ["sr.onnx", "--shape", "x=1x64", "--input", "rate=1"],
            ["no artifact has an input 'rate'", "sr [] int64"],
        ),
    ],
)
def test_bad_input_options_are_one_line_and_exit_2(cli, signatures, args, needles):
    _one_line_error(cli("bench", *args, "-b", "onnxruntime"), *needles)


def test_concurrent_resumes_store_each_cell_once(cli, workdir, mlp):
    """Three `bench --resume` at once on one database: each cell's record is stored once
    (the others are told and keep nothing), none lost."""
    import subprocess
    import sys

    args = [sys.executable, "-m", "dlbench.harness", "bench", str(mlp), "-b", "onnxruntime"]
    args += ["--batch-sizes", "1,2,4,8", "--iterations", "20", "--resume", "--db", str(workdir / "c.sqlite")]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    procs = [subprocess.Popen(args, **pipes) for _ in range(3)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    from dlbench.harness.store.results import ResultStore

    keys = [r["cell_key"] for r in ResultStore(workdir / "c.sqlite").records("status != 'failed'")]
    assert len(keys) == 4 and len(set(keys)) == 4
