"""The static INT8 recipe on graphs dlbench did not make: float tail, exclusions, layer report.

The user's case was a Keras-applications classifier (NHWC input ``x``, a
Softmax at the output, exported by tf2onnx): its INT8 build came out with
cosine 0.06 because ONNX Runtime's quantizer pins a Softmax's output to steps
of 1/255, and 1000 near-uniform probabilities all round to 0.  The Keras tests
rebuild that case small (two convolutions, 1000 classes, the same exporter),
in the tensorflow group; the rule itself is checked on a hand-made graph in
the core group.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dlbench.converters import int8_recipe
from dlbench.converters.base import ConversionError
from tests.utils.clitools import only_record

CLASSES = 1000
HWC = (16, 16, 3)


def _graph_with_tails():
    """Conv -> Sigmoid gate (inside) -> GAP -> Flatten -> Gemm -> Softmax -> Reshape -> probs,
    and a second output straight from a Tanh; one unnamed node."""
    rng = np.random.default_rng(0)
    init = [
        numpy_helper.from_array(rng.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.normal(0, 0.3, (5, 4)).astype(np.float32), "fc"),
        numpy_helper.from_array(np.array([-1, 5], np.int64), "shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "w"], ["c"], "conv", pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c"], ["gate"], "gate"),
        helper.make_node("Mul", ["c", "gate"], ["swish"], "swish"),
        helper.make_node("GlobalAveragePool", ["swish"], ["gap"], "gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], "flat"),
        helper.make_node("Gemm", ["flat", "fc"], ["logits"], "fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["p"], "softmax"),
        helper.make_node("Reshape", ["p", "shape"], ["probs"], ""),
        helper.make_node("Tanh", ["logits"], ["score"], "tanh"),
    ]
    g = helper.make_graph(
        nodes,
        "tails",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])],
        [
            helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 5]),
            helper.make_tensor_value_info("score", TensorProto.FLOAT, [1, 5]),
        ],
        init,
    )
    return helper.make_model(g).graph


def test_the_float_tail_is_the_fixed_range_ops_at_the_outputs_and_the_shape_ops_after_them():
    graph = _graph_with_tails()
    assert int8_recipe.name_nodes(graph) == 1 and graph.node[7].name == "Reshape_7"
    tail = {d["node"]: d for d in int8_recipe.float_tail(graph)}
    assert set(tail) == {"softmax", "Reshape_7", "tanh"}  # not the Sigmoid gate inside
    assert "graph output 'probs' through Reshape" in tail["softmax"]["reason"]
    assert tail["tanh"]["op"] == "Tanh" and "'score'" in tail["tanh"]["reason"]


def test_a_concat_packing_heads_into_the_output_stays_float_through_a_cast():
    """SSD's and Mask R-CNN's heads packed into one output: a quantized Concat gives
    them one range, and the small head rounds to 0 beside the large one."""
    rng = np.random.default_rng(0)
    init = [
        numpy_helper.from_array(rng.normal(0, 0.3, (c, 3, 1, 1)).astype(np.float32), n)
        for n, c in (("wa", 2), ("wb", 3))
    ]
    nodes = [
        helper.make_node("Conv", ["input", "wa"], ["a"], "head_a"),
        helper.make_node("Conv", ["input", "wb"], ["b"], "head_b"),
        helper.make_node("Flatten", ["a"], ["fa"], "flat_a"),
        helper.make_node("Flatten", ["b"], ["fb"], "flat_b"),
        helper.make_node("Concat", ["fa", "fb"], ["packed"], "pack", axis=1),
        helper.make_node("Cast", ["packed"], ["logits"], "to_float", to=TensorProto.FLOAT),
    ]
    g = helper.make_graph(
        nodes,
        "packed",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 80])],
        init,
    )
    tail = {d["node"]: d for d in int8_recipe.float_tail(helper.make_model(g).graph)}
    # Each head's Flatten keeps its own head's range: only the join and what follows.
    assert set(tail) == {"pack", "to_float"}
    assert "joins heads into graph output 'logits'" in tail["pack"]["reason"]
    assert "through Cast" in tail["pack"]["reason"]
    assert tail["to_float"]["reason"] == "a cast, after the float Concat at 'logits'"


def test_quantized_op_types_are_the_quantizers_or_refused_by_name():
    from onnxruntime import quantization as quant

    assert int8_recipe.quantized_types([], quant, dynamic=False) is None
    assert int8_recipe.quantized_types(["Conv", "Gemm"], quant, dynamic=False) == ["Conv", "Gemm"]
    with pytest.raises(
        ConversionError,
        match=r"--quantize-op-types Conv2d: .* static "
        r"quantizer does not quantize that op type; "
        r"it does .*ConvTranspose",
    ):
        int8_recipe.quantized_types(["Conv", "Conv2d"], quant, dynamic=False)
    with pytest.raises(ConversionError, match="dynamic quantizer"):
        int8_recipe.quantized_types(["Gemm"], quant, dynamic=True)


def test_exclusions_name_nodes_of_the_graph_or_are_refused_saying_what_it_has():
    graph = _graph_with_tails()
    int8_recipe.name_nodes(graph)
    got = int8_recipe.requested(graph, graph, ["fc"], ["Conv"])
    assert [(d["node"], d["reason"]) for d in got] == [
        ("fc", "--exclude-nodes"),
        ("conv", "--exclude-op-types Conv"),
    ]
    with pytest.raises(ConversionError, match=r"--exclude-nodes fcc: .*did you mean fc"):
        int8_recipe.requested(graph, graph, ["fcc"], [])
    with pytest.raises(ConversionError, match=r"no LSTM node; its op types: Conv, Flatten, Gemm"):
        int8_recipe.requested(graph, graph, [], ["LSTM"])
    source = _graph_with_tails()
    source.node.append(helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"], "bn_folded"))
    with pytest.raises(ConversionError, match="folded that node"):
        int8_recipe.requested(graph, source, ["bn_folded"], [])


# --- a Keras classifier exported by tf2onnx (tensorflow group) ------------------------------


@pytest.fixture(scope="module")
def keras_softmax_cnn(tmp_path_factory):
    """Two convolutions, global pooling, Dense(1000) and a Softmax, random weights, NHWC
    input ``x``, exported as the user did (tf2onnx over a tf.function)."""
    import keras
    import tensorflow as tf
    import tf2onnx

    keras.utils.set_random_seed(0)
    net = keras.Sequential(
        [
            keras.Input(HWC),
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(CLASSES),
            keras.layers.Softmax(),
        ]
    )
    signature = [tf.TensorSpec((None, *HWC), tf.float32, name="x")]

    @tf.function(input_signature=signature)
    def forward(x):
        return net(x, training=False)

    proto, _ = tf2onnx.convert.from_function(forward, input_signature=signature, opset=17)
    proto.ir_version = 8
    path = tmp_path_factory.mktemp("keras") / "cnn.onnx"
    onnx.save(proto, str(path))
    return path


@pytest.fixture
def cnn(keras_softmax_cnn, workdir):
    target = workdir / "cnn.onnx"
    target.write_bytes(keras_softmax_cnn.read_bytes())
    return target


def _float_nodes(path, op_type):
    """Nodes of ``op_type`` in an INT8 graph that compute in float: no quantized weights
    (a DequantizeLinear of an initializer) among their inputs, no Q/DQ on their output.
    (A float node's data input may still come through a DequantizeLinear: its producer
    was quantized.)"""
    g = onnx.load(path).graph
    inits = {t.name for t in g.initializer}
    dq_of_weight = {n.output[0] for n in g.node if n.op_type == "DequantizeLinear" and n.input[0] in inits}
    used_by = {}
    for n in g.node:
        for i in n.input:
            used_by.setdefault(i, []).append(n.op_type)
    return [
        n.name
        for n in g.node
        if n.op_type == op_type
        and not dq_of_weight.intersection(n.input)
        and "QuantizeLinear" not in used_by.get(n.output[0], [])
    ]


@pytest.mark.tensorflow
def test_a_softmax_ending_keras_cnn_verifies_with_the_softmax_kept_float(cli, workdir, cnn):
    out = cli("build", "cnn.onnx", "--to", "int8", "--json", "b.json")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    rec = only_record(workdir, "b.json")
    assert rec["status"] == "ok"
    recipe = rec["context"]["build_info"]["recipe"]
    assert recipe["float_tail"] is True
    [softmax] = recipe["float_nodes"]
    assert softmax["op"] == "Softmax" and "fixed output range at graph output" in softmax["reason"]
    g = onnx.load(workdir / "cnn.int8.onnx").graph
    node = next(n for n in g.node if n.op_type == "Softmax")
    assert node.name == softmax["node"] and node.output[0] == g.output[0].name  # no Q/DQ after
    assert sum(n.op_type == "Conv" for n in g.node) == 2 and not _float_nodes(
        workdir / "cnn.int8.onnx", "Conv"
    )  # the rest is int8
    assert "layer_errors" not in rec["metrics"]


@pytest.mark.tensorflow
def test_without_the_rule_it_is_unverified_and_the_layer_report_blames_the_softmax(cli, workdir, cnn):
    out = cli("build", "cnn.onnx", "--to", "int8", "--no-float-tail", "--json", "b.json")
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    rec = only_record(workdir, "b.json")
    assert rec["status"] == "unverified" and rec["context"]["build_info"]["recipe"]["float_nodes"] == []
    report = rec["metrics"]["layer_errors"]
    worst = report["worst"]
    assert report["samples"] == 2 and report["layers_compared"] >= 5
    lost = [r["lost_db"] or 0.0 for r in worst]  # ranked by what each layer adds
    assert lost == sorted(lost, reverse=True)
    assert worst[0]["op"] == "Softmax" and worst[0]["quantized"] and worst[0]["sqnr_db"] < 3
    assert worst[0]["lost_db"] > 20  # its logits were fine
    assert all(r["sqnr_db"] > 20 for r in worst[1:])
    assert "Worst layers, fp32 vs int8" in out.stdout
    assert out.stdout.index("UNVERIFIED") < out.stdout.index(worst[0]["node"])

    from dlbench.harness.verify.command import VerifyRequest, verify_files

    again = verify_files(
        VerifyRequest(
            reference=str(cnn),
            candidate=str(workdir / "cnn.int8.onnx"),
            layers=True,
            db=str(workdir / "r.sqlite"),
        )
    )
    assert again["status"] == "unverified"
    assert again["metrics"]["layer_errors"]["worst"][0]["node"] == worst[0]["node"]


@pytest.mark.tensorflow
def test_excluded_nodes_and_op_types_stay_float_in_the_int8_graph(cli, workdir, cnn):
    from dlbench.converters.base import BuildOptions
    from dlbench.core.errors import UserError
    from dlbench.harness.convert.build import BuildRequest, build

    src = onnx.load(cnn).graph
    matmul = next(n.name for n in src.node if n.op_type == "MatMul")
    out = cli(
        "build",
        "cnn.onnx",
        "--to",
        "int8",
        "--exclude-nodes",
        matmul,
        "--exclude-op-types",
        "Relu,Conv",
        "--json",
        "b.json",
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    floats = only_record(workdir, "b.json")["context"]["build_info"]["recipe"]["float_nodes"]
    reasons = {d["node"]: d["reason"] for d in floats}
    assert reasons[matmul] == "--exclude-nodes"
    assert sorted(d["reason"] for d in floats if d["op"] == "Conv") == ["--exclude-op-types Conv"] * 2
    int8 = workdir / "cnn.int8.onnx"
    assert _float_nodes(int8, "MatMul") == [matmul] and len(_float_nodes(int8, "Conv")) == 2
    g = onnx.load(int8).graph
    floats_w = {t.name for t in g.initializer if t.data_type == TensorProto.FLOAT}
    assert all(n.input[1] in floats_w for n in g.node if n.op_type in ("Conv", "MatMul"))

    bad = cli("build", "cnn.onnx", "--to", "int8", "--exclude-nodes", "no/such/node")
    assert (
        bad.returncode == 2
        and "--exclude-nodes no/such/node: no node of that name" in bad.stderr
        and len(bad.stderr.strip().splitlines()) == 1
    )
    with pytest.raises(
        UserError,
        match=r"--exclude-op-types LSTM: the graph has no LSTM node; "
        r"its op types: .*Conv",
    ):
        build(
            BuildRequest(
                source=str(cnn),
                to="int8",
                out=str(workdir / "x.onnx"),
                options=BuildOptions(exclude_op_types=("LSTM",)),
                db=str(workdir / "r.sqlite"),
            )
        )
    assert not (workdir / "x.onnx").exists()


def test_sqnr_reads_infinities_both_sides_agree_on_and_fails_the_rest():
    """The layer report once died with "math domain error" on a Mask R-CNN build: a
    candidate tensor with an infinity the reference lacked."""
    from dlbench.harness.verify.layers import sqnr_db

    ref = np.array([1.0, -np.inf, 2.0])
    assert sqnr_db(ref, ref) == 200.0
    assert sqnr_db(ref, np.array([1.1, -np.inf, 2.0])) == pytest.approx(20 * np.log10(np.sqrt(5) / 0.1))
    assert sqnr_db(np.array([1.0, 2.0]), np.array([1.0, np.inf])) == -200.0
    assert sqnr_db(np.zeros(3), np.ones(3)) == -200.0


def _attention_graph():
    """x [b, s, 8] -> q = x·Wq, k = x·Wk -> q·kᵀ: two weight products, one of activations."""
    rng = np.random.default_rng(0)
    w = [numpy_helper.from_array(rng.normal(size=(8, 8)).astype(np.float32), n) for n in ("wq", "wk")]
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"], name="q"),
        helper.make_node("MatMul", ["x", "wk"], ["k"], name="k"),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="scores"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", 8])
    y = helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["b", "s", "s"])
    return helper.make_graph(nodes, "attn", [x], [y], w)


def test_the_graph_chooses_dynamic_for_attention_and_recurrence_static_otherwise():
    attention = _attention_graph()
    assert int8_recipe.activation_products(attention) == ["scores"]
    dynamic, why = int8_recipe.choose_mode(attention, None)
    assert dynamic and "1 activation-by-activation products (attention)" in why
    lstm = helper.make_graph([helper.make_node("LSTM", ["x", "w", "r"], ["y"])], "rnn", [], [])
    assert int8_recipe.choose_mode(lstm, None) == (True, "the graph: 1 recurrent layer(s) (LSTM)")
    cnn = _graph_with_tails()
    assert int8_recipe.choose_mode(cnn, None)[0] is False
    # The user's word wins either way.
    assert int8_recipe.choose_mode(attention, False) == (False, "--static")
    assert int8_recipe.choose_mode(cnn, True) == (True, "--dynamic")
    # A model may declare its mode (a generated network stands for a set that quantizes
    # otherwise than its own graph would): the declaration beats the graph, not the user.
    declared = helper.make_model(lstm)
    helper.set_model_props(declared, int8_recipe.mode_metadata(False))
    said = int8_recipe.declared_mode(declared)
    assert said is False and int8_recipe.declared_mode(helper.make_model(lstm)) is None
    why = "the model's dlbench.int8_mode metadata (static)"
    assert int8_recipe.choose_mode(lstm, None, said) == (False, why)
    assert int8_recipe.choose_mode(lstm, True, said) == (True, "--dynamic")
    helper.set_model_props(declared, {"dlbench.int8_mode": "fast"})
    with pytest.raises(ConversionError, match="dlbench.int8_mode='fast': expected 'static' or 'dynamic'"):
        int8_recipe.declared_mode(declared)


BUILD_BOTH_WAYS = """
import json, sys
from pathlib import Path
import numpy as np
from dlbench.converters.base import BuildOptions
from dlbench.converters.onnx_to_int8 import HOP
from dlbench.harness.convert.calibration import Deferred

made = []
def make():
    made.append(1)
    return [np.random.default_rng(0).normal(size=(2, 4, 8)).astype(np.float32)]

source, out = Path(sys.argv[1]), {}
for name, options in (("auto", BuildOptions()), ("static", BuildOptions(dynamic=False))):
    info = HOP.build(source, source.with_name(name + ".onnx"), options, calibration=Deferred(make))
    out[name] = [info["recipe"]["mode"], len(made), (info.get("calibration") or {}).get("samples")]
print(json.dumps(out))
"""


def test_a_build_that_goes_dynamic_makes_no_calibration_set(tmp_path):
    """The set is made on first use (calibration.Deferred): an attention graph left to
    choose goes dynamic and reads none; told --static, it reads it.  In a process of its
    own: ONNX Runtime's shape tools import torch where it is installed."""
    import json

    model = helper.make_model(_attention_graph(), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "attn.onnx")
    res = subprocess.run(
        [sys.executable, "-c", BUILD_BOTH_WAYS, str(tmp_path / "attn.onnx")], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got == {"auto": ["dynamic", 0, None], "static": ["static", 1, 2]}, got
    # The same graph declaring itself static: left to choose, it is built static.
    helper.set_model_props(model, int8_recipe.mode_metadata(False))
    onnx.save(model, tmp_path / "declared.onnx")
    declared = [sys.executable, "-c", BUILD_BOTH_WAYS, str(tmp_path / "declared.onnx")]
    res = subprocess.run(declared, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout.strip().splitlines()[-1])["auto"] == ["static", 1, 2]


BUILD_AND_RUN_AT_8 = """
import sys
from pathlib import Path
import numpy as np
import onnxruntime as ort
from dlbench.converters.base import BuildOptions
from dlbench.converters.onnx_to_int8 import HOP
from dlbench.harness.convert.calibration import Deferred

source = Path(sys.argv[1])
x = np.random.default_rng(0).normal(size=(8, 16)).astype(np.float32)
out = source.with_name("int8.onnx")
info = HOP.build(source, out, BuildOptions(dynamic=False), calibration=Deferred(lambda: [x]))
# Unoptimized, so each DequantizeLinear runs as written (the default level fuses some away).
options = ort.SessionOptions()
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
session = ort.InferenceSession(str(out), options, providers=["CPUExecutionProvider"])
want = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
got = session.run(None, {"x": x})[0]
print(info["gemm_biases_flattened"], float(np.abs(got - want).max() / np.abs(want).max()))
"""


def test_a_row_shaped_bias_after_a_matmul_quantizes_and_runs_at_any_batch(tmp_path):
    """MatMul + Add of a ``[1, N]`` constant (a layer replay, some exporters' dense
    layers): the quantizer fuses them into Gemm and quantized its bias along the axis of
    one element with N scales, which ONNX Runtime refuses wherever that DequantizeLinear
    runs unfused (a layer replay's build failed its check so).  Two Gemms share the bias."""
    rng = np.random.default_rng(0)
    init = [
        numpy_helper.from_array(rng.normal(size=(16, 16)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.normal(size=(1, 16)).astype(np.float32), "row"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m1"], "m1"),
        helper.make_node("Add", ["m1", "row"], ["a1"], "a1"),
        helper.make_node("Relu", ["a1"], ["r1"], "r1"),
        helper.make_node("MatMul", ["r1", "w"], ["m2"], "m2"),
        helper.make_node("Add", ["m2", "row"], ["y"], "a2"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 16])
    model = helper.make_model(
        helper.make_graph(nodes, "dense", [x], [y], init), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    onnx.save(model, tmp_path / "dense.onnx")
    res = subprocess.run(
        [sys.executable, "-c", BUILD_AND_RUN_AT_8, str(tmp_path / "dense.onnx")],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    flattened, error = res.stdout.split()[-2:]
    assert int(flattened) == 2 and float(error) < 0.05, res.stdout


def test_flat_gemm_biases_copies_a_shared_bias_and_leaves_the_rest():
    bias = numpy_helper.from_array(np.ones((1, 4), np.float32), "row")
    flat = numpy_helper.from_array(np.ones(4, np.float32), "flat")
    nodes = [
        helper.make_node("Gemm", ["x", "w", "row"], ["g1"], "g1"),
        helper.make_node("Add", ["g1", "row"], ["a"], "a"),
        helper.make_node("Gemm", ["a", "w", "flat"], ["g2"], "g2"),
        helper.make_node("Gemm", ["g2", "w"], ["g3"], "g3"),
    ]
    graph = helper.make_graph(nodes, "g", [], [], [bias, flat])
    assert int8_recipe.flat_gemm_biases(graph) == 1
    inits = {t.name: list(t.dims) for t in graph.initializer}
    assert inits == {"row": [1, 4], "flat": [4], "g1_row_flat": [4]}
    assert list(graph.node[0].input) == ["x", "w", "g1_row_flat"] and list(graph.node[1].input) == [
        "g1",
        "row",
    ]
    assert numpy_helper.to_array(graph.initializer[2]).tolist() == [1.0] * 4
