"""The verifier, ONNX file handling and every bad-input path, on tiny hand-made models.

Core group: onnx and onnxruntime only, the CLI in subprocesses.
"""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import onnx
import pytest

from dlbench.converters import onnx_io, onnx_ir, onnx_summary
from dlbench.core.errors import UserError
from dlbench.harness.store.results import ARTIFACT_COLUMNS, ResultStore
from dlbench.harness.verify import compare as cmp
from dlbench.harness.verify import inputs as vin
from tests.utils import ROOT, tiny_onnx
from tests.utils.clitools import assert_usage_error as _one_line_error

SIZES = (1, 8)


def _logits(seed=0):
    rng = np.random.default_rng(seed)
    # Clear winners: the arg-max of each row is well separated from the runner-up.
    out = []
    for b in SIZES:
        x = rng.normal(0, 1, (b, 10)).astype(np.float32)
        x[np.arange(b), rng.integers(0, 10, b)] += 6
        out.append({"logits": x})
    return out


def _copy(outputs):
    return [{k: v.copy() for k, v in d.items()} for d in outputs]


# --- the comparison ---------------------------------------------------------------------


def test_identical_outputs_pass_with_exact_metrics():
    ref = _logits()
    v = cmp.compare(ref, _copy(ref), cmp.tolerance("fp32"), SIZES)
    assert v.ok and v.batch_sizes == [1, 8]
    [o] = v.outputs
    assert o.max_abs == 0 and o.mean_abs == 0 and o.top1 == 1.0
    assert o.cosine == pytest.approx(1.0)
    assert "within fp32 tolerance" in v.message


def test_a_planted_error_is_measured_and_located():
    ref = _logits()
    cand = _copy(ref)
    cand[1]["logits"][3, 7] += 0.5  # batch 8, sample 3, class 7
    v = cmp.compare(ref, cand, cmp.tolerance("fp32"), SIZES)
    [o] = v.outputs
    assert not v.ok and not o.ok
    assert o.max_abs == pytest.approx(0.5, rel=1e-6)
    assert o.mean_abs == pytest.approx(0.5 / 90, rel=1e-5)
    absmax = max(np.abs(r["logits"]).max() for r in ref)
    assert o.max_rel == pytest.approx(0.5 / absmax, rel=1e-5)
    assert o.worst == {
        "batch_size": 8,
        "sample": 3,
        "index": [7],
        "reference": pytest.approx(float(ref[1]["logits"][3, 7])),
        "candidate": pytest.approx(float(ref[1]["logits"][3, 7]) + 0.5),
    }
    assert "output logits over fp32 tolerance" in v.message
    assert "batch 8, sample 3, index [7]" in v.message


def test_tolerances_differ_by_precision():
    ref = _logits()
    rng = np.random.default_rng(5)
    noisy = [{"logits": r["logits"] + rng.normal(0, 0.02, r["logits"].shape).astype(np.float32)} for r in ref]
    # fp32 cannot accept 0.02 of noise; fp16 and int8 can (arg-max and direction hold).
    assert not cmp.compare(ref, noisy, cmp.tolerance("fp32"), SIZES).ok
    assert cmp.compare(ref, noisy, cmp.tolerance("fp16"), SIZES).ok
    assert cmp.compare(ref, noisy, cmp.tolerance("int8"), SIZES).ok
    # int8 is judged by top-1: two of nine samples changing class fails it.
    flipped = _copy(ref)
    for b, s in ((0, 0), (1, 5)):
        row = flipped[b]["logits"][s]
        row[np.argsort(row)[-2]] = row.max() + 1
    v = cmp.compare(ref, flipped, cmp.tolerance("int8"), SIZES)
    assert not v.ok and v.outputs[0].top1 == pytest.approx(7 / 9)
    assert "top-1 agreement 77.8% < 90%" in v.message


def test_top1_counts_only_samples_the_reference_separates():
    """A near-tie flips on any rounding: it is left out of top-1, and the count says so."""
    ref = _logits()
    tie = ref[1]["logits"][2]
    best = int(np.argmax(tie))
    tie[(best + 1) % 10] = tie[best] - 1e-3  # a 0.01 % margin, under int8's 5 %
    cand = _copy(ref)
    row = cand[1]["logits"][2]
    row[(best + 1) % 10], row[best] = row[best], row[(best + 1) % 10]  # the tie flips
    v = cmp.compare(ref, cand, cmp.tolerance("int8"), SIZES)
    [o] = v.outputs
    assert v.ok and o.top1 == 1.0 and (o.top1_judged, o.top1_samples) == (8, 9)
    assert "top-1 100% of 8 clear samples" in v.message
    # Clear samples that change class still fail it.
    for s in (0, 1):
        r = cand[1]["logits"][s]
        r[np.argsort(r)[-2]] = r.max() + 1
    v = cmp.compare(ref, cand, cmp.tolerance("int8"), SIZES)
    assert not v.ok and v.outputs[0].top1 == pytest.approx(6 / 8)


def test_a_reference_that_ignores_its_input_cannot_judge():
    """Keras' random-weight MobileNetV2 gives 0.001 for every class whatever the input:
    a candidate equal to it proves nothing, and one constant output among varying ones
    (SSD's anchors) is no reason to doubt the rest."""
    dead = [{"probs": np.full((b, 10), 0.001, np.float32)} for b in SIZES]
    v = cmp.compare(dead, _copy(dead), cmp.tolerance("int8"), SIZES)
    assert not v.ok and not v.judged and v.outputs[0].input_independent
    assert v.message.startswith("cannot judge") and v.to_dict()["judged"] is False
    mixed = [dict(r, anchors=np.ones((b, 4), np.float32)) for r, b in zip(_logits(), SIZES)]
    v = cmp.compare(mixed, _copy(mixed), cmp.tolerance("fp32"), SIZES)
    assert v.ok and v.judged and [o.input_independent for o in v.outputs] == [False, True]


def test_nan_and_shape_mismatch_always_fail():
    ref = _logits()
    nan = _copy(ref)
    nan[0]["logits"][0, 0] = np.nan
    v = cmp.compare(ref, nan, cmp.tolerance("int8"), SIZES)
    assert not v.ok and "NaN or Inf" in v.message
    short = _copy(ref)
    short[1]["logits"] = short[1]["logits"][:, :9]
    v = cmp.compare(ref, short, cmp.tolerance("int8"), SIZES)
    assert not v.ok and "shape is [8, 9]" in v.message


def test_tolerance_overrides_and_bad_values():
    assert cmp.tolerance("fp32", rtol=0.5).rtol == 0.5
    with pytest.raises(UserError, match="unknown precision"):
        cmp.tolerance("fp8")
    with pytest.raises(UserError, match="out of range"):
        cmp.tolerance("int8", min_cosine=2.0)
    assert vin.parse_batch_sizes("1, 8,8") == (1, 8)
    for bad in ("0,1", "a", ""):
        with pytest.raises(UserError):
            vin.parse_batch_sizes(bad)


def test_verification_inputs_are_fixed_and_independent_of_calibration():
    a = vin.image_inputs((3, 16, 16), 5, SIZES)
    b = vin.image_inputs((3, 16, 16), 5, SIZES)
    assert [x.shape for x in a] == [(1, 3, 16, 16), (8, 3, 16, 16)]
    assert all(np.array_equal(x, y) for x, y in zip(a, b)) and a[0].dtype == np.float32
    calib = vin.image_stream((3, 16, 16), 5, 8, 2, seed=vin.CALIB_SEED)
    assert vin.CALIB_SEED != vin.VERIFY_SEED
    assert not np.array_equal(calib[0], a[1])
    assert not np.array_equal(calib[0], calib[1])


# --- ONNX files ---------------------------------------------------------------------------


def test_ir_version_is_lowered_to_what_onnxruntime_reads(tmp_path):
    model = tiny_onnx.classifier(ir_version=onnx.IR_VERSION)
    limit = onnx_ir.ort_max_ir_version()
    path = tiny_onnx.save(model, tmp_path / "new.onnx")
    if onnx.IR_VERSION > limit:
        with pytest.raises(UserError, match=f"reads at most {limit}"):
            onnx_io.session(path)
    before, after = onnx_ir.lower_ir_version(model)
    assert before == onnx.IR_VERSION and after == min(before, limit) and after >= 8
    onnx_io.session(tiny_onnx.save(model, tmp_path / "lowered.onnx"))


def test_ir_version_is_not_lowered_below_what_the_content_needs():
    model = tiny_onnx.classifier(ir_version=onnx.IR_VERSION)
    model.graph.initializer.append(onnx.helper.make_tensor("f6", onnx.TensorProto.FLOAT6E2M3, [1], [0.5]))
    need, why = onnx_ir.required_ir_version(model)
    assert need == 14 and "FLOAT6E2M3" in why
    if onnx_ir.ort_max_ir_version() < 14:
        with pytest.raises(UserError, match="needs ONNX IR version 14 .element type FLOAT6E2M3"):
            onnx_ir.lower_ir_version(model, "f6.onnx")


def test_normalize_io_and_metadata():
    model = tiny_onnx.classifier()
    g = model.graph
    g.input[0].name = "x:0"
    g.node[0].input[0] = "x:0"
    g.output[0].name = "dense/BiasAdd:0"
    g.node[-1].output[0] = "dense/BiasAdd:0"
    g.output[0].type.tensor_type.shape.dim[0].Clear()
    g.output[0].type.tensor_type.shape.dim[0].dim_value = 1  # MindSpore-style fixed batch
    renames = onnx_io.normalize_io(model)
    assert renames == {"x:0": "input", "dense/BiasAdd:0": "logits"}
    onnx_io.set_metadata(model, {"model": "m", "precision": "fp32"})
    model = onnx_io.infer_shapes(model)
    onnx_io.check_model(model, "m.onnx")
    s = onnx_summary.summarize(model)
    assert [(t.name, t.shape) for t in s.inputs] == [("input", ("batch", 3, 16, 16))]
    assert [(t.name, t.shape) for t in s.outputs] == [("logits", ("batch", 5))]
    assert s.metadata == {"model": "m", "precision": "fp32"} and s.precision == "fp32"


def test_toposort_repairs_appended_nodes():
    model = tiny_onnx.classifier()
    nodes = list(model.graph.node)
    del model.graph.node[:]
    model.graph.node.extend(nodes[1:] + nodes[:1])  # the first node moved last
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model)
    onnx_io.toposort(model)
    onnx.checker.check_model(model)
    assert [n.op_type for n in model.graph.node] == [n.op_type for n in nodes]


def test_artifacts_table_keeps_every_verdict_and_answers_by_content(tmp_path):
    store = ResultStore(tmp_path / "r.sqlite")
    assert store.artifact("0" * 64) is None
    row = {
        "path": "/m.onnx",
        "sha256": "ab" * 32,
        "format": "onnx",
        "precision": "fp32",
        "verified": True,
        "verdict": {"ok": True},
        "created_at": "t",
        "hop": "pytorch->onnx",
    }
    first = store.add_artifact(row)
    second = store.add_artifact({**row, "verified": False, "verdict": {"ok": False}})
    assert second > first
    found = store.artifact("ab" * 32)
    assert found["id"] == second and found["verified"] is False and found["verdict"] == {"ok": False}
    assert [a["verified"] for a in store.artifacts()] == [True, False]
    cols = {r[1] for r in sqlite3.connect(store.path).execute("PRAGMA table_info(artifacts)")}
    assert set(ARTIFACT_COLUMNS) <= cols

    doc = (ROOT / "docs" / "results-schema.md").read_text()
    for col in ARTIFACT_COLUMNS:
        assert f"`{col}`" in doc, f"artifacts column {col} is not documented"


# --- the CLI: verify, and bad input -------------------------------------------------------


@pytest.fixture
def tiny(workdir):
    return tiny_onnx.save(tiny_onnx.classifier(), workdir / "tiny.onnx")


def _bad_files(d, tiny_path):
    good = open(tiny_path, "rb").read()
    (d / "truncated.onnx").write_bytes(good[: len(good) // 2])
    (d / "corrupt.onnx").write_bytes(np.random.default_rng(0).bytes(4000))
    (d / "empty.onnx").write_bytes(b"")
    (d / "text.onnx").write_text("this is a README, not a model\n" * 20)
    (d / "folder.onnx").mkdir()
    unknown = tiny_onnx.classifier()
    unknown.graph.node[1].op_type = "FancyRelu"
    onnx.save(unknown, d / "unknown_op.onnx")
    custom = tiny_onnx.classifier()
    custom.graph.node[1].op_type = "FancyRelu"
    custom.graph.node[1].domain = "com.example"
    custom.opset_import.append(onnx.helper.make_opsetid("com.example", 1))
    onnx.save(custom, d / "custom_op.onnx")


BAD = [
    ("truncated.onnx", "corrupt or truncated"),
    ("corrupt.onnx", "corrupt or truncated"),
    ("empty.onnx", "the file is empty"),
    ("text.onnx", "is a text file, not an ONNX model"),
    ("folder.onnx", "is a directory"),
    ("unknown_op.onnx", "operator FancyRelu, which no ONNX opset defines"),
    ("custom_op.onnx", "operator com.example:FancyRelu has no implementation in onnxruntime"),
    ("missing.onnx", "no such file"),
]


@pytest.mark.parametrize("name,needle", BAD)
def test_bad_onnx_is_one_line_and_exit_2(cli, workdir, tiny, name, needle):
    _bad_files(workdir, tiny)
    for args in (
        ["build", name, "--to", "int8"],
        ["build", name, "--to", "fp16"],
        ["verify", tiny, name],
        ["verify", name, tiny],
    ):
        _one_line_error(cli(*args), name, needle)
    assert not list(workdir.glob(".*partial")) and not list(workdir.glob("*.int8.onnx"))


def test_tensorrt_build_without_gpu_or_tensorrt_exits_2_with_the_reason(cli, workdir, tiny):
    from dlbench.harness.backends.tensorrt import availability_problems

    problems = availability_problems()
    if not problems:
        pytest.skip("this machine has an NVIDIA GPU, tensorrt and cuda-python")
    out = cli("build", tiny, "--to", "tensorrt", "--precision", "fp16")
    _one_line_error(out, "cannot build --to tensorrt here", problems[0])
    assert not list(workdir.glob("*.plan"))
    # Asked for an engine, the machine is the reason, whatever the file.
    _one_line_error(cli("build", "missing.onnx", "--to", "tensorrt"), problems[0])
    (workdir / "model.fp16.plan").write_bytes(b"\x00engine bytes")
    _one_line_error(cli("verify", tiny, "model.fp16.plan"), "cannot run a TensorRT engine here", problems[0])


def test_usage_errors_of_build_and_verify(cli, workdir, tiny):
    _one_line_error(
        cli("build", tiny, "--to", "int8", "--calib-data", "none.npz"), "--calib-data none.npz: no such file"
    )
    np.savez(workdir / "wrong.npz", x=np.zeros((4, 3, 8, 8), np.float32))
    _one_line_error(
        cli("build", tiny, "--to", "int8", "--calib-data", "wrong.npz"),
        "x is [4, 3, 8, 8], the model takes N×3×16×16",
    )
    _one_line_error(cli("build", tiny, "--to", "int8", "--precision", "fp16"), "--to int8 makes int8 models")
    _one_line_error(cli("build", tiny, "--to", "int8", "--out", tiny), "would overwrite the source model")
    _one_line_error(cli("verify", tiny, tiny, "--batch-sizes", "0"), "at least 1")
    int8 = cli("build", tiny, "--to", "int8")
    assert int8.returncode == 0, int8.stderr
    _one_line_error(cli("build", "tiny.int8.onnx", "--to", "fp16"), "is already a int8 model")


def test_verify_cli_passes_a_faithful_copy_and_catches_a_changed_weight(cli, workdir, tiny):
    model = onnx.load(tiny)
    tiny_onnx.save(model, workdir / "copy.onnx")
    tiny_onnx.save(tiny_onnx.scale_initializer(model, "w2", 1.05), workdir / "broken.onnx")
    ok = cli("verify", tiny, "copy.onnx", "--json", "ok.json")
    assert ok.returncode == 0, ok.stderr
    assert "| logits |" in ok.stdout and "| ok" in ok.stdout
    bad = cli("verify", tiny, "broken.onnx", "--json", "bad.json")
    assert bad.returncode == 1
    assert "UNVERIFIED" in bad.stdout and "over fp32 tolerance" in bad.stderr
    [rec] = json.loads((workdir / "bad.json").read_text())
    assert rec["kind"] == "verify" and rec["status"] == "unverified"
    assert rec["metrics"]["outputs"]["logits"]["max_abs"] > 0
    # The same weights at fp16/int8 tolerance: 5% on one layer still moves the logits a lot,
    # but an explicit looser tolerance is the user's call and is recorded.
    loose = cli("verify", tiny, "broken.onnx", "--rtol", "0.5", "--json", "loose.json")
    [lrec] = json.loads((workdir / "loose.json").read_text())
    assert lrec["metrics"]["verdict"]["tolerance"]["rtol"] == 0.5
    assert loose.returncode == (0 if lrec["status"] == "ok" else 1)
    store = ResultStore(workdir / "results.sqlite")
    by_sha = store.artifact(onnx_io.sha256(workdir / "broken.onnx"))
    assert by_sha["verified"] is (lrec["status"] == "ok") and by_sha["hop"] == "verify"
    assert store.artifact(onnx_io.sha256(workdir / "copy.onnx"))["verified"] is True
    kinds = [r["status"] for r in store.records("kind = 'verify'")]
    assert kinds[:2] == ["ok", "unverified"]
