"""Old graphs normalized before building: frozen, raised, folded, and checked.

The graph here is made the way Caffe2-era exporters wrote them (the light model
zoo's traits, small): IR 3, opset 9, batch fixed at 1, every initializer also a
graph input, the convolution's weights computed by nodes (ConstantOfShape of an
initializer shape, plus an initializer of noise, so the weights still differ),
and a residual add written as a two-input ``Sum``.
The nine real light models run in ``test_light_zoo*.py``.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from dlbench.converters import onnx_normalize
from dlbench.core.tensors import TensorInfo, class_count, fixed_batch, follow_batch
from dlbench.harness.evaluate.scoring import Tally
from dlbench.harness.verify.compare import compare, tolerance
from tests.utils import tiny_onnx
from tests.utils.clitools import assert_usage_error, only_record

CLASSES = 6


def old_graph(path) -> str:
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(np.array([CLASSES, 3, 3, 3], np.int64), "w_shape"),
        numpy_helper.from_array(rng.normal(0, 0.3, (CLASSES, 3, 3, 3)).astype(np.float32), "w_noise"),
        numpy_helper.from_array(rng.normal(0, 0.1, CLASSES).astype(np.float32), "b"),
    ]
    nodes = [
        helper.make_node(
            "ConstantOfShape",
            ["w_shape"],
            ["w_base"],
            value=numpy_helper.from_array(np.array([0.02], np.float32)),
        ),
        helper.make_node("Add", ["w_base", "w_noise"], ["w"]),
        helper.make_node("Conv", ["data", "w", "b"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("Sum", ["conv", "relu"], ["residual"]),
        helper.make_node("GlobalAveragePool", ["residual"], ["gap"]),
        helper.make_node("Softmax", ["gap"], ["prob"], axis=1),
    ]
    inputs = [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 8, 8])] + [
        helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits
    ]
    graph = helper.make_graph(
        nodes,
        "old",
        inputs,
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, CLASSES, 1, 1])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 3
    onnx.save(model, str(path))
    return str(path)


def _run(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"data": x})[0]


def test_an_old_graph_is_frozen_raised_and_folded_and_computes_the_same(tmp_path):
    src = old_graph(tmp_path / "old.onnx")
    out = tmp_path / "normalized.onnx"
    info = onnx_normalize.normalize(src, out, min_opset=13)
    assert info["steps"] == ["freeze", "opset", "sum", "fold"]
    assert info["frozen_initializer_inputs"] == 3 and info["folded_nodes"] == 2
    assert info["opset_upgraded"] == [9, 13] and info["sums_as_adds"] == 1
    model = onnx.load(str(out))
    assert [i.name for i in model.graph.input] == ["data"]
    ops = [n.op_type for n in model.graph.node]
    assert not {"ConstantOfShape", "Sum"} & set(ops) and ops.count("Add") == 1
    assert onnx_normalize.opset_of(model) == 13
    assert onnx_normalize.needs(model, min_opset=13) == []
    x = np.random.default_rng(1).normal(0, 1, (1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(_run(out, x), _run(src, x), rtol=1e-6, atol=1e-7)
    assert "froze 3 initializers" in onnx_normalize.describe(info)


def test_a_graph_that_needs_nothing_is_left_alone(tmp_path):
    src = tiny_onnx.save(tiny_onnx.classifier(), tmp_path / "modern.onnx")
    assert onnx_normalize.normalize(src, tmp_path / "n.onnx", min_opset=13) is None
    assert not (tmp_path / "n.onnx").exists()


def test_no_freeze_keeps_the_weights_a_user_feeds(tmp_path):
    src = old_graph(tmp_path / "old.onnx")
    # Nothing is constant while the weights stay overridable inputs: nothing to fold.
    info = onnx_normalize.normalize(src, tmp_path / "a.onnx", freeze=False)
    assert info["steps"] == ["sum"] and "folded_nodes" not in info
    info = onnx_normalize.normalize(src, tmp_path / "b.onnx", freeze=False, min_opset=13)
    assert info["steps"] == ["opset", "sum"] and info["initializer_inputs_kept"] == 3
    assert len(onnx_normalize.initializer_inputs(onnx.load(str(tmp_path / "b.onnx")).graph)) == 3


def test_build_normalizes_checks_and_says_so(cli, workdir):
    src = old_graph(workdir / "old.onnx")
    out = cli("build", src, "--to", "int8", "--json", "int8.json")
    assert out.returncode == 0, out.stderr
    rec = only_record(workdir, "int8.json")
    assert rec["metrics"]["verdict"]["ok"] and rec["metrics"]["verdict"]["batch_sizes"] == [1]
    norm = rec["context"]["normalize"]
    assert norm["steps"] == ["freeze", "opset", "sum", "fold"] and norm["verdict"]["ok"]
    assert norm["verdict"]["max_abs"] <= 1e-6
    assert rec["context"]["build_info"]["calibration"]["batch"] == 1
    assert any("calibrated in batches of 1 (asked for 8)" in n for n in rec["notes"])
    assert "note: normalized the graph: froze 3 initializers" in out.stderr
    assert "verified at batch 1 only (asked for 1,8)" in out.stderr
    # The user's file is untouched; the INT8 file has fixed weights and no old plumbing.
    assert onnx_normalize.initializer_inputs(onnx.load(src).graph)
    int8 = onnx.load(str(workdir / "old.int8.onnx"))
    assert not {"ConstantOfShape", "Sum"} & {n.op_type for n in int8.graph.node}

    out = cli("build", src, "--to", "int8", "--no-freeze", "-o", "kept.int8.onnx")
    assert_usage_error(out, "--no-freeze: 3 initializers", "stay graph inputs")
    assert not (workdir / "kept.int8.onnx").exists()
    out = cli("build", src, "--to", "fp16", "--no-freeze", "--json", "fp16.json")
    assert out.returncode == 0, out.stderr
    rec = only_record(workdir, "fp16.json")
    assert rec["metrics"]["verdict"]["ok"] and rec["context"]["normalize"]["steps"] == ["sum"]

    out = cli("verify", src, "old.fp16.onnx", "--json", "verify.json")
    assert out.returncode == 0, out.stderr
    assert only_record(workdir, "verify.json")["metrics"]["verdict"]["batch_sizes"] == [1]
    assert "fixed at 1: verified at batch 1 only" in out.stderr


def test_the_batch_a_graph_cannot_take_is_the_one_named(cli, workdir):
    """A dynamic batch that a Reshape pins to 1 fails at batch 8, and says 8."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        "pinned",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 48])],
        [numpy_helper.from_array(np.array([1, 48], np.int64), "shape")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(workdir / "pinned.onnx"))
    out = cli("build", "pinned.onnx", "--to", "fp16")
    assert_usage_error(out, "cannot run it on a batch of 8")


def test_fixed_batches_and_class_heads_are_read_one_way():
    def sig(*shapes):
        return [TensorInfo(f"i{k}", "float32", s) for k, s in enumerate(shapes)]

    assert fixed_batch(sig((1, 3, 8, 8))) == 1
    assert fixed_batch(sig(("N", 3), (1, 3))) is None and fixed_batch(sig((2, 3), (1, 3))) is None
    assert follow_batch(sig(("N", 3)), (1, 8)) == ((1, 8), None)
    sizes, note = follow_batch(sig((4, 3)), (1, 8), "scored")
    assert sizes == (4,) and note.endswith("scored at batch 4 only (asked for 1,8)")
    assert follow_batch(sig((4, 3)), (4,)) == ((4,), None)
    assert class_count(TensorInfo("p", "float32", (1, 1000, 1, 1))) == 1000
    assert class_count(TensorInfo("p", "float32", ("N", 10))) == 10
    assert class_count(TensorInfo("f", "float32", (1, 64, 7, 7))) is None

    tally = Tally()
    tally.add(np.eye(3, dtype=np.float32).reshape(3, 3, 1, 1) * 5, np.array([0, 1, 0]))
    assert tally.correct == 2 and tally.samples == 3
    with pytest.raises(ValueError, match="expected \\(batch, classes\\)"):
        Tally().add(np.zeros((3, 3, 2, 2)), np.array([0, 1, 0]))
    ref = [{"p": np.eye(4, dtype=np.float32).reshape(4, 4, 1, 1)}]
    cand = [{"p": np.roll(np.eye(4, dtype=np.float32), 1, axis=1).reshape(4, 4, 1, 1)}]
    verdict = compare(ref, cand, tolerance("int8"), [4])
    assert verdict.outputs[0].top1 == 0.0 and not verdict.ok
