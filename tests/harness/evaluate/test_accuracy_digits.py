"""Accuracy end to end on real data that needs no download (the UCI digits dlbench ships).

For each framework: LeNet-5 trained for a short, fixed budget (500 SGD steps of
64, lr 0.02, momentum 0.9, seed 0: about 22 epochs of the 1,437 training
images) must reach 95 % top-1 on the 360 held-out images; its ONNX export must
score what the framework scored (the same network: within 0.5 pp), and the
INT8 (calibrated on the digits' training split) and FP16 files built from it
must stay within 1 pp of the fp32 file.  That is the proof that training,
export, quantization and the backends preserve what the network learned.

Core group: every framework runs in the CLI's subprocesses; this process only
reads JSON files and the results database.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlbench.harness.store.results import ResultStore
from tests.utils.clitools import assert_usage_error, run_cli
from tests.utils.frameworks import FRAMEWORKS

STEPS, BATCH, LR = 500, 64, 0.02
MIN_ACCURACY = 0.95
SAME_NETWORK_PP = 0.005  # fp32 ONNX against the framework's own --eval
REDUCED_PRECISION_PP = 0.01  # INT8 / FP16 against fp32 ONNX


def _run(tmp: Path, *args: str, timeout: float = 600):
    return run_cli(*args, env={"DLBENCH_DB": str(tmp / "results.sqlite")}, cwd=tmp, timeout=timeout)


def _ok(out) -> None:
    assert out.returncode == 0, f"exit {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"


def _record(path: Path) -> dict:
    [rec] = json.loads(path.read_text())
    return rec


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """Train, export, build and evaluate everything once; the tests read the results."""
    tmp = tmp_path_factory.mktemp("digits")
    out = _run(
        tmp,
        "train",
        "lenet5",
        "--framework",
        ",".join(FRAMEWORKS),
        "--data",
        "digits",
        "--eval",
        "--steps",
        str(STEPS),
        "--warmup-steps",
        "0",
        "--batch-size",
        str(BATCH),
        "--lr",
        str(LR),
        "--seed",
        "0",
        "--threads",
        "1",
        "--json",
        "train.json",
    )
    _ok(out)
    train = {r["framework"]: r for r in json.loads((tmp / "train.json").read_text())}
    dirs = [f"runs/lenet5/{fw}" for fw in FRAMEWORKS]
    _ok(_run(tmp, "export", *dirs, "--threads", "1"))
    builds, evals = {}, {}
    for fw in FRAMEWORKS:
        onnx = f"runs/lenet5/{fw}/model.onnx"
        for to, extra in (("int8", ("--calib-data", "digits")), ("fp16", ())):
            out = _run(
                tmp, "build", onnx, "--to", to, *extra, "--threads", "1", "--json", f"{fw}.build.{to}.json"
            )
            _ok(out)
            builds[fw, to] = _record(tmp / f"{fw}.build.{to}.json")
        for label, artifact in (
            ("native", f"runs/lenet5/{fw}"),
            ("fp32", onnx),
            ("int8", f"runs/lenet5/{fw}/model.int8.onnx"),
            ("fp16", f"runs/lenet5/{fw}/model.fp16.onnx"),
        ):
            json_path = f"{fw}.eval.{label}.json"
            out = _run(tmp, "eval", artifact, "--data", "digits", "--threads", "1", "--json", json_path)
            _ok(out)
            evals[fw, label] = (_record(tmp / json_path), out.stdout)
    return {"dir": tmp, "train": train, "builds": builds, "evals": evals}


def _accuracy(chain, fw, label) -> float:
    return chain["evals"][fw, label][0]["metrics"]["eval"]["accuracy"]


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_each_framework_learns_the_digits(chain, fw):
    rec = chain["train"][fw]
    assert rec["status"] == "ok", rec["error"]
    ev = rec["metrics"]["eval"]
    assert (ev["samples"], ev["split"]) == (360, "test")
    assert ev["accuracy"] >= MIN_ACCURACY, f"{fw}: {ev['accuracy']:.2%} after {STEPS} steps"
    assert rec["metrics"]["loss_end"] < 0.1 * rec["metrics"]["loss_start"]


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_the_checkpoint_and_its_onnx_score_what_training_scored(chain, fw):
    trained = chain["train"][fw]["metrics"]["eval"]
    native, fp32 = chain["evals"][fw, "native"][0], chain["evals"][fw, "fp32"][0]
    # The same framework on the same split: exactly the same images right.
    assert native["backend"] == fw and native["precision"] == "fp32"
    assert native["metrics"]["eval"]["correct"] == round(trained["accuracy"] * trained["samples"])
    assert fp32["backend"] == "onnxruntime" and fp32["precision"] == "fp32"
    assert fp32["framework"] == fw and fp32["model"] == "lenet5"
    assert abs(fp32["metrics"]["eval"]["accuracy"] - trained["accuracy"]) <= SAME_NETWORK_PP
    assert fp32["metrics"]["eval"]["loss"] == pytest.approx(trained["loss"], rel=1e-3)


@pytest.mark.parametrize("precision", ("int8", "fp16"))
@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_int8_and_fp16_keep_the_accuracy(chain, fw, precision):
    build = chain["builds"][fw, precision]
    assert build["status"] == "ok", build["error"]
    rec = chain["evals"][fw, precision][0]
    assert rec["precision"] == precision and rec["status"] == "ok"
    fp32 = _accuracy(chain, fw, "fp32")
    got = _accuracy(chain, fw, precision)
    assert abs(got - fp32) <= REDUCED_PRECISION_PP, f"{fw} {precision}: {got:.2%} vs {fp32:.2%}"


def test_int8_is_calibrated_and_verified_on_the_digits(chain):
    for fw in FRAMEWORKS:
        rec = chain["builds"][fw, "int8"]
        cal = rec["context"]["build_info"]["calibration"]
        assert cal["source"] == "digits" and cal["samples"] == 1437  # the training split
        assert rec["context"]["verify_inputs"].startswith("digits: held-out")
        assert rec["metrics"]["verdict"]["ok"] is True
    # MindSpore exports opset 11; per-channel Q/DQ needs 13: raised, recorded and checked
    # against the original before quantizing.  The other exporters' graphs need nothing.
    normalized = chain["builds"]["mindspore", "int8"]["context"]["normalize"]
    assert normalized["opset_upgraded"] == [11, 13] and normalized["verdict"]["ok"]
    assert "raised opset 11 to 13" in chain["builds"]["mindspore", "int8"]["notes"][-1]
    for fw in ("pytorch", "tensorflow"):
        assert "normalize" not in chain["builds"][fw, "int8"]["context"]


def test_eval_records_are_stored_and_printed(chain):
    recs = ResultStore(chain["dir"] / "results.sqlite").records("kind = 'eval'")
    assert len(recs) == 4 * len(FRAMEWORKS)
    assert {(r["framework"], r["backend"], r["precision"]) for r in recs} == {
        (fw, b, p)
        for fw in FRAMEWORKS
        for b, p in ((fw, "fp32"), ("onnxruntime", "fp32"), ("onnxruntime", "int8"), ("onnxruntime", "fp16"))
    }
    for r in recs:
        assert r["status"] == "ok" and r["model"] == "lenet5" and r["batch_size"] == 64
        assert set(r["metrics"]["eval"]) >= {"loss", "accuracy", "samples", "split"}
        assert r["iterations"] == 6  # 360 held-out images in batches of 64
        assert r["context"]["data"]["reader"] == "digits"
    onnx = [r for r in recs if r["backend"] == "onnxruntime"]
    assert all(r["context"]["artifact"]["verification"]["ok"] for r in onnx)
    rec, stdout = chain["evals"]["pytorch", "int8"]
    assert "Top-1 accuracy" in stdout
    assert f"{100 * rec['metrics']['eval']['accuracy']:.2f} %" in stdout


def test_bad_eval_input_is_one_line(chain):
    tmp = chain["dir"]
    onnx = "runs/lenet5/pytorch/model.onnx"
    assert_usage_error(_run(tmp, "eval", "lenet5"), "random weights")
    assert_usage_error(_run(tmp, "eval", "missing.onnx"), "missing.onnx", "no such file")
    assert_usage_error(_run(tmp, "eval", onnx, "--data", "nowhere"), "--data nowhere", "no such file")
    assert_usage_error(
        _run(tmp, "eval", onnx, "--backend", "pytorch"), "onnx artifact", "--backend onnxruntime"
    )
    assert_usage_error(_run(tmp, "eval", onnx, "--batch-size", "0"), "--batch-size")
    assert_usage_error(
        _run(tmp, "build", onnx, "--to", "int8", "--calib-data", "nodata"),
        "--calib-data nodata",
        "no such file",
    )


def test_a_cell_that_fails_is_stored_as_failed(chain):
    tmp = chain["dir"]
    out = _run(tmp, "eval", "runs/lenet5/pytorch/model.onnx", "--timeout", "0.01", "--json", "failed.json")
    assert out.returncode == 1, out.stderr
    rec = _record(tmp / "failed.json")
    assert rec["status"] == "failed" and "timed out" in rec["error"]
    assert "FAILED" in out.stdout and "dlbench eval: failed" in out.stderr
    stored = ResultStore(tmp / "results.sqlite").records("kind = 'eval' AND status = 'failed'")
    assert [r["id"] for r in stored] == [rec["id"]]
