"""``dlbench compare``: the bootstrap verdict on synthetic samples with a known
difference, and the command end to end on a real SQLite database and real
``--json`` files (records written with the schema the harness writes)."""

import json
import re

import numpy as np
import pytest

from dlbench.harness.compare import bootstrap_ratio, compare
from dlbench.harness.machine.fingerprint import fingerprint
from dlbench.harness.store.results import ResultStore
from tests.utils import benchmodels
from tests.utils.clitools import assert_usage_error

MACHINE = fingerprint()
OTHER_MACHINE = dict(MACHINE, machine_id="0123456789abcdef", hostname="elsewhere")


def lognormal(seed, mean, n=100, cv=0.05):
    """Timing-like noise: right-skewed, coefficient of variation ``cv``."""
    sigma = np.sqrt(np.log(1 + cv * cv))
    rng = np.random.default_rng(seed)
    return (mean * rng.lognormal(-sigma * sigma / 2, sigma, n)).tolist()


# --- the statistics -------------------------------------------------------------------------


def test_a_ten_percent_difference_is_faster_and_swapped_slower():
    base, cand = lognormal(1, 100.0), lognormal(2, 110.0)
    up = bootstrap_ratio(base, cand, seed=3)
    assert up.verdict == "faster"
    assert 1 < up.low < 1.10 < up.high < 1.2 and up.low <= up.ratio <= up.high
    down = bootstrap_ratio(cand, base, seed=3)
    assert down.verdict == "slower"
    assert down.high < 1 and abs(down.ratio * up.ratio - 1) < 1e-9


def test_two_draws_of_one_distribution_are_within_noise():
    verdicts = [
        bootstrap_ratio(lognormal(100 + i, 100.0), lognormal(200 + i, 100.0), seed=i).verdict
        for i in range(20)
    ]
    # A 95 % interval excludes the truth about once in twenty.
    assert verdicts.count("within noise") >= 17, verdicts
    assert bootstrap_ratio(lognormal(7, 50.0, n=60), lognormal(8, 50.0, n=200)).verdict == "within noise"


def test_the_interval_is_seeded_and_widens_with_confidence():
    a, b = lognormal(1, 100.0, n=50), lognormal(2, 103.0, n=50)
    assert bootstrap_ratio(a, b, seed=5) == bootstrap_ratio(a, b, seed=5)
    narrow, wide = bootstrap_ratio(a, b, confidence=0.8), bootstrap_ratio(a, b, confidence=0.99)
    assert wide.low < narrow.low and wide.high > narrow.high


# --- synthetic records in the harness's schema ----------------------------------------------


def train_record(
    run_id,
    framework,
    step_s,
    *,
    batch=16,
    steps=40,
    warmup_total=3.0,
    loss_end=0.5,
    accuracy=None,
    status="ok",
    machine=MACHINE,
    seed=0,
    started="2026-01-01T00:00:00+00:00",
):
    times = lognormal(seed, step_s, n=steps)
    metrics = {
        "throughput_sps": batch * steps / sum(times),
        "window_s": sum(times),
        "step_times_s": times,
        "warmup_steps": 2,
        "warmup_total_s": warmup_total,
        "loss_start": 2.3,
        "loss_end": loss_end,
    }
    if accuracy is not None:
        metrics["eval"] = {"loss": loss_end, "accuracy": accuracy, "samples": 256}
    if status == "failed":
        metrics = {}
    return {
        "run_id": run_id,
        "kind": "train",
        "cell_key": f"{framework}-{batch}",
        "status": status,
        "error": "killed by signal 9" if status == "failed" else None,
        "started_at": started,
        "model": "resnet50",
        "framework": framework,
        "framework_version": {"pytorch": "2.13.0", "mindspore": "2.8.0"}.get(framework),
        "device": "cpu",
        "precision": "fp32",
        "batch_size": batch,
        "intra_op_threads": 2,
        "inter_op_threads": 1,
        "iterations": steps,
        "warmup_iterations": 2,
        "throughput_sps": metrics.get("throughput_sps"),
        "machine_id": machine["machine_id"],
        "context": {"config": {}},
        "metrics": metrics,
    }


def bench_record(
    run_id,
    latency_ms,
    *,
    batch=8,
    backend="onnxruntime",
    n=150,
    seed=0,
    machine=MACHINE,
    status="ok",
    samples=True,
):
    lat = lognormal(seed, latency_ms, n=n)
    metrics = {
        "throughput_sps": batch * n * 1000 / sum(lat),
        "window_s": sum(lat) / 1000,
        "iterations": n,
        "latency_ms": {"p50": float(np.median(lat))},
    }
    if samples:
        metrics["latency_samples_ms"] = lat
    return {
        "run_id": run_id,
        "kind": "bench",
        "cell_key": f"{backend}-{batch}",
        "status": status,
        "started_at": "2026-01-01T00:00:00+00:00",
        "model": "mlp",
        "framework": None,
        "backend": backend,
        "device": "cpu",
        "precision": "fp32",
        "batch_size": batch,
        "scenario": "offline",
        "intra_op_threads": 2,
        "inter_op_threads": 1,
        "iterations": n,
        "throughput_sps": metrics["throughput_sps"],
        "machine_id": machine["machine_id"],
        "context": {},
        "metrics": metrics,
    }


def store_all(path, records, machine=None):
    store = ResultStore(path)
    for r in records:
        mid = r["machine_id"]
        store.add(r, machine or (MACHINE if mid == MACHINE["machine_id"] else OTHER_MACHINE))
    return store


@pytest.fixture
def db(workdir):
    """Run A: two bench cells; run B: the batch-8 cell 10 % slower, batch 1 missing,
    plus a cell whose old record has no samples.  Training: PyTorch and MindSpore."""
    store_all(
        workdir / "results.sqlite",
        [
            bench_record("A", 2.0, batch=8, seed=1),
            bench_record("A", 0.5, batch=1, seed=2),
            bench_record("A", 1.0, batch=4, seed=3, samples=False),
            bench_record("B", 2.2, batch=8, seed=4),
            bench_record("B", 1.0, batch=4, seed=5),
            train_record("T1", "pytorch", 0.50, seed=6, loss_end=0.4123, warmup_total=3.0),
            train_record("T2", "mindspore", 0.40, seed=7, loss_end=0.3877, accuracy=0.875, warmup_total=2.5),
            # An older, slower MindSpore run of the same cell: the newest ok one must win.
            train_record("T0", "mindspore", 0.90, seed=8, started="2025-12-01T00:00:00+00:00"),
        ],
    )
    return workdir / "results.sqlite"


def _row(stdout, needle):
    lines = [ln for ln in stdout.splitlines() if ln.startswith("|") and needle in ln]
    assert len(lines) == 1, (needle, stdout)
    return [c.strip() for c in lines[0].strip("|").split("|")]


def test_two_runs_pair_by_cell_and_the_regression_gate_uses_the_threshold(cli, db):
    out = cli("compare", "A", "B")
    assert out.returncode == 0, out.stderr
    assert "noise floor 2.0 % (default: no floor measured on this machine" in out.stdout
    assert _row(out.stdout, "batch 8")[7] == "150+150 iterations"
    row = _row(out.stdout, "batch 8")
    assert row[0] == "mlp" and row[1] == "onnxruntime, cpu, fp32, batch 8, offline, 2 threads"
    ratio, (low, high) = float(row[4]), map(float, re.findall(r"[\d.]+", row[5]))
    assert row[6] == "slower" and low < ratio < high < 1 and 0.85 < ratio < 0.95
    assert "no samples" in _row(out.stdout, "batch 4")[6]
    assert "only in the baseline: mlp: bench, onnxruntime, cpu, fp32, batch 1" in out.stdout
    assert cli("compare", "A", "B", "--fail-on-regression", "5").returncode == 1
    gate = cli("compare", "A", "B", "--fail-on-regression", "20")
    assert gate.returncode == 0 and "no cell slower by more than 20 %" in gate.stdout
    assert cli("compare", "B", "A", "--fail-on-regression", "1").returncode == 0  # faster
    assert (
        cli(
            "compare", "--run", "A", "--run", "B", "--batch-size", "8", "--fail-on-regression", "5"
        ).returncode
        == 1
    )


def test_framework_axis_prints_the_papers_table_2(cli, db):
    out = cli(
        "compare",
        "--framework",
        "pytorch",
        "--framework",
        "mindspore",
        "--model",
        "resnet50",
        "--json",
        "cmp.json",
    )
    assert out.returncode == 0, out.stderr
    records = {r["framework"]: r for r in ResultStore(db).records("run_id IN ('T1', 'T2')")}
    pt, ms = records["pytorch"], records["mindspore"]
    assert _row(out.stdout, "pytorch → mindspore")[6] == "faster"
    t_pt = pt["metrics"]["window_s"] + pt["metrics"]["warmup_total_s"]
    t_ms = ms["metrics"]["window_s"] + ms["metrics"]["warmup_total_s"]
    assert _row(out.stdout, "ResNet-50 v1.5_PT") == [
        "ResNet-50 v1.5_PT",
        "PyTorch 2.13.0",
        f"{t_pt:.2f}(s)",
        "0.4123",
        "—",
        f"{pt['throughput_sps']:.2f}/s",
    ]
    assert _row(out.stdout, "ResNet-50 v1.5_MS") == [
        "ResNet-50 v1.5_MS",
        "MindSpore 2.8.0",
        f"{t_ms:.2f}(s)",
        "0.3877",
        "87.50%",
        f"{ms['throughput_sps']:.2f}/s",
    ]
    assert f"MindSpore / PyTorch time: {t_ms / t_pt:.2f}" in out.stdout
    assert "metrics.window_s" in out.stdout and "metrics.warmup_total_s" in out.stdout
    saved = json.loads((db.parent / "cmp.json").read_text())
    [pair] = saved["pairs"]
    assert pair["candidate"]["run_id"] == "T2" and pair["verdict"] == "faster"
    # No framework axis: no Table 2.
    assert "Table 2" not in cli("compare", "A", "B").stdout


def test_json_files_compare_and_a_failed_cell_is_reported_not_compared(cli, workdir):
    base = [bench_record("x", 1.0, seed=1), bench_record("x", 1.0, batch=2, seed=2)]
    cand = [bench_record("y", 0.9, seed=3), bench_record("y", 1.0, batch=2, status="failed")]
    (workdir / "a.json").write_text(json.dumps(base))
    (workdir / "b.json").write_text(json.dumps(cand))
    out = cli("compare", "a.json", "b.json", "--fail-on-regression", "0")
    assert out.returncode == 0, out.stderr
    assert _row(out.stdout, "batch 8")[6] == "faster"
    failed = _row(out.stdout, "batch 2")
    assert failed[3] == "FAILED" and failed[6].startswith("failed")


def test_different_machines_are_refused_unless_allowed(cli, workdir):
    store_all(
        workdir / "results.sqlite",
        [bench_record("A", 1.0, seed=1), bench_record("B", 1.0, seed=2, machine=OTHER_MACHINE)],
    )
    assert_usage_error(cli("compare", "A", "B"), "different machines", "--allow-different-machines")
    out = cli("compare", "A", "B", "--allow-different-machines")
    assert out.returncode == 0, out.stderr
    row = _row(out.stdout, "batch 8")
    assert row[-1] == f"{MACHINE['machine_id']} → {OTHER_MACHINE['machine_id']}"


def test_the_python_api_lists_unmatched_cells():
    base = [bench_record("A", 1.0, batch=b, seed=b) for b in (1, 8)]
    cand = [bench_record("B", 1.0, batch=8, seed=9, backend="tensorrt")]
    result = compare(base, cand, axes=["backend"])
    [pair] = result.pairs
    assert pair.baseline["batch_size"] == 8 and pair.verdict == "within noise"
    assert [r["batch_size"] for r in result.only_baseline] == [1] and not result.only_candidate


@pytest.mark.parametrize(
    "args,needles",
    [
        (("A", "B"), ("no run 'A'",)),  # empty database
        (("--framework", "pytorch", "--framework", "mindspore"), ("no results database",)),
        (("missing.json", "other.json"), ("missing.json", "no such file")),
        (("list.json", "list.json"), ("not a dlbench --json file",)),
        (("--framework", "pytorch"), ("--framework was given 1 time",)),
        (("--backend", "a", "--backend", "b", "--backend", "c"), ("--backend was given 3 time",)),
        (("only-one",), ("two sources",)),
        ((), ("nothing to compare",)),
        (("--calibrate", "--processes", "2"), ("--processes must be at least 3",)),
        (("A", "B", "--calibrate"), ("--calibrate measures a noise floor",)),
        (("--calibrate", "--backend", "a", "--backend", "b"), ("give --backend once",)),
        (("A", "B", "--min-effect", "-1"), ("--min-effect takes a percentage",)),
        (("A", "B", "--processes", "4"), ("--processes applies to --calibrate only",)),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, workdir, args, needles):
    (workdir / "list.json").write_text(json.dumps({"not": "a list"}))
    assert_usage_error(cli("compare", *args), *needles)


def test_missing_runs_and_cells_that_never_match_are_bad_input(cli, db, workdir):
    assert_usage_error(cli("compare", "A", "nope"), "no run 'nope'")
    assert_usage_error(cli("compare", "A", "T1"), "nothing to compare")  # bench vs train
    assert_usage_error(
        cli("compare", "--framework", "pytorch", "--framework", "tensorflow"),
        "nothing to compare",
        "framework=tensorflow",
    )
    ResultStore(workdir / "empty.sqlite").check_writable()
    assert_usage_error(cli("compare", "--run", "A", "--run", "B", "--db", "empty.sqlite"), "no run 'A'")
    assert_usage_error(cli("compare", "--backend", "x", "--backend", "y", "--db", "empty.sqlite"), "is empty")


def test_two_real_bench_runs_of_a_tiny_model(cli, workdir):
    """Real records from real ONNX Runtime cells: whatever the verdict, it is reached."""
    model = benchmodels.mlp(workdir / "mlp.onnx")
    fast = (
        "--min-duration",
        "0.3",
        "--min-iterations",
        "20",
        "--warmup",
        "2",
        "--max-warmup",
        "10",
        "--cv-threshold",
        "100",
        "--batch-sizes",
        "4",
        "--threads",
        "1",
    )
    for _ in range(2):
        out = cli("bench", str(model), "-b", "onnxruntime", *fast, env={"DLBENCH_RUN_ID": ""})
        assert out.returncode == 0, out.stderr[-2000:]
    runs = sorted({r["run_id"] for r in ResultStore(workdir / "results.sqlite").records()})
    out = cli("compare", *runs, "--fail-on-regression", "90")
    assert out.returncode == 0, out.stderr
    row = _row(out.stdout, "batch 4")
    assert row[6].split(" (")[0] in ("faster", "slower", "within noise")
    low, high = map(float, re.findall(r"[\d.]+", row[5]))
    assert low <= float(row[4]) <= high


def test_a_change_below_the_noise_floor_is_within_noise():
    """Separate processes differ by 1-2 %: a tight interval on a 1 % change is not a verdict."""
    base, cand = lognormal(11, 100.0, n=2000, cv=0.01), lognormal(12, 101.0, n=2000, cv=0.01)
    tight = bootstrap_ratio(base, cand, seed=1)
    assert tight.low > 1 and tight.verdict == "faster"
    assert bootstrap_ratio(base, cand, seed=1, min_effect=0.02).verdict == "within noise"
    ten = bootstrap_ratio(lognormal(1, 100.0), lognormal(2, 110.0), seed=3, min_effect=0.02)
    assert ten.verdict == "faster"


# --- process-level samples and the measured noise floor -------------------------------------


def with_repeats(record, throughputs):
    """A bench record as ``--repeats`` stores it: one entry per fresh process."""
    r = json.loads(json.dumps(record))
    r["metrics"]["repeats"] = [{"throughput_sps": t} for t in throughputs]
    return r


def test_three_processes_a_side_are_the_samples_else_iterations_and_it_says_so():
    base = with_repeats(bench_record("A", 1.0, seed=1), [1000.0, 1010.0, 990.0])
    # Per-iteration samples of these two records say "faster" (10 % less latency); the
    # processes say nothing of the kind, and they are what counts.
    cand = with_repeats(bench_record("B", 0.9, seed=2), [1005.0, 995.0, 1012.0])
    [pair] = compare([base], [cand]).pairs
    assert pair.basis == "processes" and pair.verdict == "within noise"
    assert (pair.estimate.n_baseline, pair.estimate.n_candidate) == (3, 3)
    slower = with_repeats(bench_record("B", 0.9, seed=2), [500.0, 505.0, 498.0])
    [pair] = compare([base], [slower]).pairs
    assert pair.basis == "processes" and pair.verdict == "slower"
    assert pair.ratio == pytest.approx(500.0 / 1000.0)
    # One side without enough processes: both sides fall back to iterations, with a note.
    two = with_repeats(bench_record("B", 0.9, seed=2), [1005.0, 995.0])
    [pair] = compare([base], [two]).pairs
    assert pair.basis == "iterations" and pair.estimate.n_baseline == 150
    assert pair.verdict == "faster" and "only the baseline has repeated processes" in pair.note


def test_the_floor_is_symmetric_and_can_exceed_100_percent():
    """A floor of 150 % (a very noisy machine) still lets a 10x slowdown be seen."""
    base = with_repeats(bench_record("A", 1.0, seed=1), [1000.0, 1100.0, 900.0])
    slow = with_repeats(bench_record("B", 1.0, seed=2), [100.0, 110.0, 90.0])
    [pair] = compare([base], [slow], min_effect=1.5).pairs
    assert pair.verdict == "slower"
    [pair] = compare([slow], [base], min_effect=1.5).pairs
    assert pair.verdict == "faster"
    [pair] = compare([base], [slow], min_effect=9.5).pairs  # 1 / 10.5 < 0.1: no
    assert pair.verdict == "within noise"


RULES = {
    (True, True): "both",
    (True, False): "within_process",
    (False, True): "between_processes",
    (False, False): None,
}
CAL = (
    "--min-duration",
    "0.1",
    "--min-iterations",
    "20",
    "--warmup",
    "2",
    "--max-warmup",
    "10",
    "--threads",
    "1",
    "--batch-sizes",
    "8",
    "--no-progress",
)


def test_calibrated_floor_real_repeats_identical_and_heavier_cells(cli, workdir):
    """Real cells in fresh processes, in a real SQLite store: --calibrate (its built-in ONNX
    model on ONNX Runtime) stores this machine's floor and later compares use it; the same
    model doing 512x the work is slower; cells with one known service time are within noise;
    the stability rules say which of them flagged a cell."""
    out = cli("compare", "--calibrate", "--processes", "5", "--min-duration", "0.1", "--threads", "1")
    assert out.returncode == 0, out.stderr[-3000:]
    store = ResultStore(workdir / "results.sqlite")
    [floor] = store.records("kind = 'noise_floor'")
    [cal] = store.records("kind = 'bench'")
    assert cal["model"] == floor["model"] == "dlbench-calibration" and cal["batch_size"] == 8
    thr = [r["throughput_sps"] for r in cal["metrics"]["repeats"]]
    assert len(thr) == 5 and floor["metrics"]["throughputs_sps"] == thr
    value = floor["metrics"]["noise_floor"]
    assert value == pytest.approx((max(thr) - min(thr)) / sorted(thr)[2])
    assert store.noise_floor(MACHINE["machine_id"])["id"] == floor["id"]
    said = f"noise floor {value * 100:.1f} % (measured {floor['started_at'][:10]} over 5 processes)"
    assert said in out.stdout

    for d in ("a", "b"):
        (workdir / d).mkdir()
    # One model name ("m"), two versions of it: the second does 512x the matrix work.
    small = benchmodels.mlp(workdir / "a" / "m.onnx")
    heavy = benchmodels.mlp(workdir / "b" / "m.onnx", din=1024, dout=1024)
    env = {"DLBENCH_RUN_ID": ""}
    runs = []
    for model, extra in (
        # ONNX Runtime cells whose rules are forced: between processes only ...
        (small, ("-b", "onnxruntime", "--iqr-threshold", "100", "--repeat-spread-threshold", "1e-9")),
        # ... and within a process only (--cv-threshold: the option's old name).
        (heavy, ("-b", "onnxruntime", "--cv-threshold", "1e-9", "--repeat-spread-threshold", "100")),
        # Twice the same known service time (a 20 ms sleep: what other processes on a
        # busy machine barely move; within 2 % here under load 5 on 2 cores), judged by
        # the default rules.
        (small, ("-b", "selftest", "-O", "service_ms=20", "--min-iterations", "10")),
        (small, ("-b", "selftest", "-O", "service_ms=20", "--min-iterations", "10")),
    ):
        out = cli("bench", str(model), "--repeats", "3", *CAL, *extra, "--json", "r.json", env=env)
        assert out.returncode == 0, out.stderr[-3000:]
        [rec] = json.loads((workdir / "r.json").read_text())
        runs.append(rec["run_id"])
        s, reps = rec["metrics"]["stability"], rec["metrics"]["repeats"]
        assert s["within_process"] == pytest.approx(sorted(r["iqr_over_median"] for r in reps)[1])
        procs = [r["throughput_sps"] for r in reps]
        assert s["between_processes"] == pytest.approx((max(procs) - min(procs)) / sorted(procs)[1])
        assert set(rec["percentile_support"]) == {"p50", "p90", "p95", "p99"}
        over = tuple(s[k] > s["threshold"][k] for k in ("within_process", "between_processes"))
        assert s["rule"] == RULES[over]
        assert (rec["status"] == "unstable") == any(over) == s["unstable"]
    rules = [r["metrics"]["stability"]["rule"] for r in store.records("kind = 'bench'")]
    assert rules[1:3] == ["between_processes", "within_process"]

    out = cli("compare", runs[0], runs[1], "--json", "heavy.json")
    assert out.returncode == 0, out.stderr
    assert said in out.stdout
    row = _row(out.stdout, "batch 8")
    assert row[6].startswith("slower") and float(row[4]) < 0.5 and row[7] == "3+3 processes"
    saved = json.loads((workdir / "heavy.json").read_text())
    assert saved["noise_floor"]["source"] == "measured"
    assert saved["noise_floor"]["value"] == pytest.approx(value)
    assert saved["pairs"][0]["basis"] == "processes"
    assert _row(cli("compare", runs[1], runs[0]).stdout, "batch 8")[6].startswith("faster")

    out = cli("compare", runs[2], runs[3])
    assert said in out.stdout
    row = _row(out.stdout, "batch 8")
    assert row[6].startswith("within noise") and row[7] == "3+3 processes"
    # --min-effect still overrides the stored floor.
    out = cli("compare", runs[0], runs[1], "--min-effect", "50")
    assert "noise floor 50.0 % (--min-effect)" in out.stdout
