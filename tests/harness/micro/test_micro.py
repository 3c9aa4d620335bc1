"""dlbench micro: ops and their counts, real cells on every CPU engine, the numpy check,
bad input, and the --with version axis against wheels the test builds (offline)."""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from dlbench.core.errors import UserError
from dlbench.harness.cells import envs
from dlbench.harness.micro import engines
from dlbench.harness.micro.ops import from_model, parse
from tests.utils import tiny_onnx
from tests.utils.clitools import assert_usage_error, micro_records

FAST = ["--min-duration", "0.02", "--min-iterations", "3", "--warmup", "1", "--threads", "1"]
ALL_ENGINES = "numpy,pytorch,tensorflow,mindspore,onnxruntime"


def test_shapes_parse_and_count():
    (g,) = parse("gemm", "32x2048x1000")
    assert g.dims == (32, 2048, 1000) and g.flops() == 2 * 32 * 2048 * 1000
    assert parse("gemm", "512")[0].dims == (512, 512, 512)
    (c,) = parse("conv", "16x64x56x56:64k3")
    assert c.out_hw() == (56, 56) and c.flops() == 2 * 16 * 64 * 56 * 56 * 64 * 9
    (stem,) = parse("conv", "1x3x224x224:64k7s2")
    assert stem.out_hw() == (112, 112) and stem.label == "conv 1x3x224x224:64k7s2"
    copy, triad = parse("memory", "8")
    assert (copy.kernel, triad.kernel) == ("copy", "triad")
    assert copy.bytes_moved("fp32") == 2 * 8 << 20 and triad.bytes_moved("fp32") == 3 * 8 << 20
    assert triad.flops() == 2 * (8 << 20) // 4 and copy.label == "copy 8MiB"
    for kind, bad in (
        ("gemm", "12xx"),
        ("conv", "1x3x224x224"),
        ("memory", "0"),
        ("conv", "1x3x2x2:4k0"),
        ("gemm", "0x4x4"),
    ):
        with pytest.raises(UserError):
            parse(kind, bad)


def test_zoo_shapes_come_from_the_walk():
    convs = from_model("conv", "resnet50", 4)
    assert convs[0].dims == (4, 3, 224, 224, 64, 7, 2)
    assert (4, 64, 56, 56, 64, 3, 1) in [o.dims for o in convs]
    assert len({o.dims for o in convs}) == len(convs)  # distinct shapes only
    assert [o.dims for o in from_model("gemm", "resnet50", 32)] == [(32, 2048, 1000)]
    with pytest.raises(UserError):
        from_model("memory", "resnet50", 1)


def test_a_wrong_result_fails_the_check():
    """The reference slice catches a kernel that computed something else."""
    (op,) = parse("gemm", "16x8x4")
    inputs = engines.make_inputs(op, "fp32")
    right = engines.Kernel(lambda: None, lambda: inputs["a"] @ inputs["b"], "numpy")
    assert engines.check(op, "fp32", inputs, right) < 1e-5
    wrong = engines.Kernel(lambda: None, lambda: inputs["a"] @ inputs["b"] * 1.01, "bad")
    with pytest.raises(RuntimeError, match="wrong gemm"):
        engines.check(op, "fp32", inputs, wrong)
    (conv,) = parse("conv", "2x3x9x9:4k3s2")
    cin = engines.make_inputs(conv, "fp32")
    want, take = engines.reference(conv, cin)
    assert want.shape == conv.out_hw()


def test_every_engine_runs_gemm_and_is_checked(cli, workdir):
    db = workdir / "m.sqlite"
    res = cli(
        "micro",
        "gemm",
        "--shape",
        "48x64x40",
        "--engine",
        ALL_ENGINES,
        "--precision",
        "fp32,bf16,int8",
        "--db",
        str(db),
        *FAST,
    )
    rows = {(r["backend"], r["precision"]): r for r in micro_records(db)}
    # bf16 and int8 only where the engine's API has a kernel: the rest are said and left out.
    assert "numpy has no bf16 gemm kernel (it has fp32): left out" in res.stderr
    assert set(rows) >= {(e, "fp32") for e in ALL_ENGINES.split(",")}
    assert ("onnxruntime", "int8") in rows and ("pytorch", "bf16") in rows
    assert ("numpy", "int8") not in rows
    for key, r in rows.items():
        if key == ("mindspore", "bf16"):  # MindSpore's CPU MatMul has no bf16 kernel
            assert r["status"] == "failed" and "MatMul" in r["error"], r["error"]
            continue
        assert r["status"] in ("ok", "unstable"), (key, r["error"])
        m = r["metrics"]
        assert m["gflops"] == pytest.approx(2 * 48 * 64 * 40 * r["throughput_sps"] / 1e9)
        assert m["relative_error"] <= engines.TOLERANCE[r["precision"]]
        assert m["iterations"] >= 3 and m["warmup_iterations"] >= 1 and m["latency_samples_ms"]
        assert r["intra_op_threads"] == 1 and r["backend_version"]
        assert r["context"]["runtime"]["library"] and r["context"]["allocator"]
    assert rows[("pytorch", "fp32")]["context"]["math_mode"]
    assert res.returncode == 1  # one cell failed; the sweep went on
    assert "| gemm 48x64x40" in res.stdout and "FAILED: TypeError" in res.stdout


def test_conv_and_memory_on_every_engine(cli, workdir):
    db = workdir / "m.sqlite"
    res = cli("micro", "conv", "--shape", "2x8x12x12:16k3s2", "--engine", ALL_ENGINES, "--db", str(db), *FAST)
    assert "numpy has no fp32 conv kernel: left out" in res.stderr
    res2 = cli("micro", "memory", "--shape", "1", "--engine", ALL_ENGINES, "--db", str(db), *FAST)
    assert res.returncode == 0 and res2.returncode == 0, res.stdout + res2.stdout
    rows = micro_records(db)
    convs = [r for r in rows if r["context"]["op"]["kind"] == "conv"]
    assert {r["backend"] for r in convs} == {"pytorch", "tensorflow", "mindspore", "onnxruntime"}
    tf = next(r for r in convs if r["backend"] == "tensorflow")
    assert tf["context"]["runtime"]["layout"] == "NHWC"
    streams = [r for r in rows if r["context"]["op"]["kind"] == "memory"]
    assert len(streams) == 10 and all(r["metrics"]["gbps"] > 0 for r in streams)
    assert {r["model"] for r in streams} == {"copy 1MiB", "triad 1MiB"}
    assert "of best stream" in res2.stdout


def test_bad_input_is_one_line(cli, workdir):
    for args, needle in (
        (["gemm", "--shape", "12xx"], "MxKxN"),
        (["gemm", "--engine", "nope"], "unknown engine"),
        (["gemm", "--precision", "fp64"], "unknown precision"),
        (["gemm", "--engine", "pytorch", "--precision", "tf32"], "only on a GPU (--device cuda)"),
        (["conv", "--engine", "numpy"], "numpy has no fp32 conv kernel"),
        (["gemm", "--with", "numpy>=2"], "PACKAGE==VERSION"),
        (["memory", "--model", "resnet50"], "memory streams have none"),
        (["gemm", "--model", "nosuch"], "nosuch"),
    ):
        assert_usage_error(cli("micro", *args, "--db", str(workdir / "x.sqlite")), needle)
    assert not (workdir / "x.sqlite").exists()


def _wheel(where: Path, name: str, version: str) -> None:
    """A pure-Python wheel, written as pip would: module, METADATA, WHEEL, RECORD."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: dlbench-tests\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join(record + [f"{info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(where / f"{name}-{version}-py3-none-any.whl", "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)


def test_with_is_an_axis_of_cached_environments(cli, workdir, monkeypatch):
    wheels = workdir / "wheels"
    wheels.mkdir()
    for version in ("1.0", "2.0"):
        _wheel(wheels, "dlbprobe", version)
    cache = workdir / "envs"
    monkeypatch.setenv("DLBENCH_ENV_CACHE", str(cache))
    monkeypatch.setenv("UV_FIND_LINKS", str(wheels))
    monkeypatch.setenv("UV_NO_INDEX", "1")  # offline: the two wheels only
    db = workdir / "m.sqlite"
    args = ("micro", "memory", "--shape", "1", "--engine", "numpy", "--db", str(db), *FAST)
    res = cli(*args, "--with", "dlbprobe==1.0", "--with", "dlbprobe==2.0", "--with", "dlbprobe==9.9")
    assert res.returncode == 1  # 9.9 cannot install: its cells fail
    rows = micro_records(db)
    assert len(rows) == 6
    for r in rows:
        spec = r["context"]["with"]
        if spec == "dlbprobe==9.9":
            assert r["status"] == "failed" and "cannot install" in r["error"]
            assert "dlbprobe" in r["error"] and "\n" not in r["error"]
        else:
            assert r["status"] in ("ok", "unstable"), r["error"]
            assert spec in r["context"]["packages"]  # the package set the cell imported
            assert r["context"]["with_resolution"] == {
                "spec": spec,
                "dependencies": "pinned to the installed versions",
            }
            assert any(p.startswith("numpy==") for p in r["context"]["packages"])
    made = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    assert sorted(made) == sorted(envs.location(f"dlbprobe=={v}").name for v in ("1.0", "2.0"))
    res = cli(*args, "--with", "dlbprobe==2.0")  # cached: reused, not reinstalled
    assert res.returncode == 0
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == made
    cmp = cli("compare", "--with", "dlbprobe==1.0", "--with", "dlbprobe==2.0", "--db", str(db))
    assert cmp.returncode == 0, cmp.stderr
    assert "[dlbprobe==1.0 → dlbprobe==2.0]" in cmp.stdout and "copy 1MiB" in cmp.stdout
    assert_usage_error(
        cli("compare", "--with", "installed", "--with", "dlbprobe==2.0", "--db", str(db)),
        "nothing to compare",
    )

    # bench takes the same axis: the cached overlay is reused, a bad one fails its cell.
    mlp = tiny_onnx.save(tiny_onnx.mlp(), workdir / "mlp.onnx")
    res = cli(
        "bench",
        mlp,
        "-b",
        "onnxruntime",
        "--with",
        "dlbprobe==1.0",
        "--with",
        "dlbprobe==9.9",
        "--iterations",
        "5",
        "--warmup",
        "1",
        "--threads",
        "1",
        "--db",
        str(db),
        "--json",
        "b.json",
    )
    assert res.returncode == 1
    ok, bad = json.loads((workdir / "b.json").read_text())
    assert ok["status"] in ("ok", "unstable") and ok["context"]["with"] == "dlbprobe==1.0"
    assert "dlbprobe==1.0" in ok["context"]["packages"] and ok["cell_key"] != bad["cell_key"]
    assert bad["status"] == "failed" and "cannot install" in bad["error"]
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == made

    # So does train: a checkpoint per environment, a With column, the failure a record.
    res = cli(
        "train",
        "lenet5",
        "-f",
        "pytorch",
        "--steps",
        "2",
        "--warmup-steps",
        "0",
        "--batch-size",
        "8",
        "--threads",
        "1",
        "--with",
        "dlbprobe==1.0",
        "--with",
        "dlbprobe==9.9",
        "--out",
        "runs",
        "--db",
        str(db),
        "--json",
        "t.json",
    )
    assert res.returncode == 1, res.stderr
    ok, bad = json.loads((workdir / "t.json").read_text())
    assert ok["status"] == "ok", ok["error"]
    assert ok["context"]["with"] == "dlbprobe==1.0" and "dlbprobe==1.0" in ok["context"]["packages"]
    assert any(p.startswith("torch==") for p in ok["context"]["packages"])
    assert ok["context"]["with_resolution"]["dependencies"] == "pinned to the installed versions"
    assert Path(ok["context"]["checkpoint"]).parent == Path("runs/lenet5/pytorch-with-dlbprobe-1.0")
    assert bad["status"] == "failed" and "cannot install" in bad["error"]
    assert not (workdir / "runs/lenet5/pytorch-with-dlbprobe-9.9").exists()
    header = next(ln for ln in res.stdout.splitlines() if "Precision" in ln)
    columns = [c.strip() for c in header.split("|")]
    assert columns[columns.index("Precision") - 1] == "With" and "dlbprobe==9.9" in res.stdout
