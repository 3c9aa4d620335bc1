"""The synthetic network's framework versions: PyTorch's (TorchScript) computes what ONNX
Runtime computes; Keras's has the same units, counts and order in Keras's own layers.  Each
is a file that loads without dlbench's code and runs at a batch it was not traced at.

Every group collects this module, so a framework is imported only inside a test or fixture.
"""

from __future__ import annotations

import functools
import importlib
import json
import re

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from dlbench.harness.synth import emit
from dlbench.harness.synth.counts import DIVERGENCE_LIMIT, unit_costs
from dlbench.harness.synth.frameworks import VERSIONS, width
from dlbench.harness.synth.units import Unit
from tests.utils.clitools import assert_usage_error
from tests.utils.frameworks import frameworks
from tests.utils.synthlanes import lanes


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """The network of every lane kind, converted once per framework: the tests read it."""

    @functools.cache
    def convert(framework: str):
        root = tmp_path_factory.mktemp(f"synth-{framework}")
        path = root / "synthetic.onnx"
        onnx.save(emit.network(lanes(), seed=1), str(path))
        version = VERSIONS[framework]
        saved = root / f"synthetic{version.suffix}"
        done = importlib.import_module(version.module).convert(str(path), str(saved))
        return path, saved, done

    return convert


@pytest.mark.parametrize("framework", frameworks("pytorch", "tensorflow"))
def test_the_saved_version_runs_at_a_batch_it_was_not_traced_at(framework, converted):
    path, saved, _ = converted(framework)
    x = np.random.default_rng(0).standard_normal((5, width(str(path)))).astype(np.float32)  # traced at 2
    if framework == "pytorch":
        import torch

        with torch.no_grad():
            y = torch.jit.load(str(saved))(torch.from_numpy(x))[0].numpy()
    else:
        import keras

        y = np.asarray(keras.models.load_model(str(saved))(x))
    assert y.shape == (5, 1) and np.isfinite(y).all()


@pytest.mark.pytorch
def test_the_torchscript_version_computes_what_onnx_runtime_does(converted):
    import onnxruntime as ort
    import torch

    path, saved, done = converted("pytorch")
    assert done["max_relative_difference"] < 1e-3
    scripted = torch.jit.load(str(saved))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    width = session.get_inputs()[0].shape[1]
    x = np.random.default_rng(5).standard_normal((5, width)).astype(np.float32)  # traced at 2
    want = session.run(None, {"input": x})
    with torch.no_grad():
        got = scripted(torch.from_numpy(x))
    # The shape lane: two Gathers of [0, 1] and an Add of [1, 1], traced as the shape.
    assert got[0].shape == (5, 1) and got[1].tolist() == want[1].tolist() == [6, width + 1]
    np.testing.assert_allclose(got[0].numpy(), want[0], rtol=1e-3, atol=1e-4)


@pytest.mark.pytorch
def test_a_recurrent_unit_is_one_fused_kernel_call_as_an_applications_is(converted):
    """An LSTM application runs ``nn.LSTM``: one fused kernel over the sequence.  A
    step-by-step version would pay a dozen dispatches a time step, and the network's
    PyTorch ratios would read its interpreter, not its applications' kernels."""
    import torch

    _, saved, _ = converted("pytorch")
    scripted = torch.jit.load(str(saved))
    kinds = [node.kind() for node in scripted.inlined_graph.nodes()]
    assert kinds.count("aten::lstm") == 1 and kinds.count("aten::gru") == 1
    assert kinds.count("aten::sigmoid") == 0 and kinds.count("aten::tanh") == 0
    # The weights are kept once, regrouped: ONNX's own [dirs, gates x hidden, input] W
    # and R (the lanes' only 3-d constants) are not saved beside them.
    assert not [b.shape for b in scripted.buffers() if b.dim() == 3]


@pytest.mark.pytorch
def test_a_bridge_s_tile_is_one_copy_not_repeat_s_thirty_dispatches(converted):
    """Each bridge's Tile: a few copies concatenated, many expanded and copied once, none at
    all where it copies once (``emit._held``); ``Tensor.repeat`` would pay some 30
    dispatches a bridge that ONNX Runtime runs as one kernel and no application has."""
    import torch

    from dlbench.harness.synth.torch_net import _CONCATENATED, _tile

    path, saved, done = converted("pytorch")
    assert done["max_relative_difference"] < 1e-3
    model = onnx.load(str(path))
    reps = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    copies = [int(c) for n in model.graph.node if n.op_type == "Tile" for c in reps[n.input[1]] if c > 1]
    few = sum(c <= _CONCATENATED for c in copies)
    kinds = [node.kind() for node in torch.jit.load(str(saved)).inlined_graph.nodes()]
    assert "aten::repeat" not in kinds and 0 < few < len(copies)
    assert kinds.count("aten::cat") == few and kinds.count("aten::expand") == len(copies) - few
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for reps in ([1, 1, 3], [1, 12, 1], [2, 1, 1], [1, 2, 9], [3, 1, 20]):
        np.testing.assert_array_equal(_tile(torch.from_numpy(x), reps).numpy(), np.tile(x, reps))


@pytest.mark.pytorch
def test_a_per_channel_convolution_runs_as_the_batch_norm_it_stands_for(converted):
    """ONNX Runtime runs a batch norm as a depthwise 1x1 convolution, so applications'
    batch norms become such units.  PyTorch runs a grouped 1x1 convolution on one thread
    through its reference kernel, group by group: the network's PyTorch time would read
    that path, which no application takes.  It runs as one batch norm instead, as the
    applications' own do; the other convolutions stay convolutions."""
    import torch

    _, saved, done = converted("pytorch")
    assert done["max_relative_difference"] < 1e-3  # the same values as ONNX Runtime's
    kinds = [node.kind() for node in torch.jit.load(str(saved)).inlined_graph.nodes()]
    assert kinds.count("aten::batch_norm") == 1 + 2 and kinds.count("aten::_convolution") == 3 + 2


@pytest.mark.pytorch
def test_a_network_whose_mean_cancels_is_judged_on_its_activations(tmp_path):
    """A network that ends in a layer norm: its output, the mean of normalized values, is
    ~1e-9 and differs between two correct implementations by as much as itself.  CI's
    toy workload generated one, and the check refused a right PyTorch version ("differs by
    2.8"); the activations it ends in agree to 1e-7."""
    from dlbench.harness.synth.torch_net import convert

    norm = Unit("LayerNormalization", "normalization", (1, 128, 256), (1, 128, 256))
    path = tmp_path / "norm.onnx"
    onnx.save(emit.network([(norm, 3)], 0, name="norm"), str(path))
    done = convert(str(path), str(tmp_path / "norm.pt"))
    assert done["max_relative_difference"] < 1e-5


@pytest.mark.pytorch
def test_an_op_it_does_not_know_is_refused_by_name():
    import torch
    from onnx import TensorProto, helper

    from dlbench.harness.synth.torch_net import build

    graph = helper.make_graph(
        [helper.make_node("Cos", ["input"], ["output"])],
        "g",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 4])],
    )
    with pytest.raises(ValueError, match="Cos: not an op the synthetic network emits"):
        build(helper.make_model(graph))(torch.zeros(1, 4))


@pytest.mark.tensorflow
def test_the_keras_version_has_the_units_in_keras_layers(converted):
    import keras

    _, saved, done = converted("tensorflow")
    model = keras.models.load_model(str(saved))
    kinds = [type(layer).__name__ for layer in model.layers]
    # The depthwise 3x3 and 1x1 lanes (TensorFlow's depthwise kernel runs a 1x1 one whole).
    assert kinds.count("Conv2D") == 3 and kinds.count("DepthwiseConv2D") == 4 and kinds.count("Dense") == 2
    assert kinds.count("Bidirectional") == 1 and "MaxPooling2D" in kinds
    assert done["parameters"] == model.count_params() > 0


@pytest.mark.pytorch
def test_a_reference_on_pytorch_prices_each_unit_in_the_networks_scoped_version(tmp_path, cli):
    """``1x1@pytorch``: the application runs there by its name and each network as its
    TorchScript version, profiled through a version whose every ONNX node runs in a
    profiler range of its name: each unit's PyTorch time is found by name, as ONNX
    Runtime's is, and the fit answers to that engine's prices, not only ONNX Runtime's."""
    w, s = tmp_path / "w.json", tmp_path / "s.onnx"
    out = cli(
        "synth", "profile", "lenet5", "--reference", "1x1,4x1,1x1@pytorch", "--timings", "1", "-o", str(w)
    )
    assert out.returncode == 0, out.stderr[-3000:]
    workload = json.loads(w.read_text())
    assert [r["backend"] for r in workload["references"]] == [None, None, "pytorch"]
    [app] = workload["applications"]
    assert app["native"] == "lenet5" and "at batch 1, 1 thread, on pytorch" in out.stderr
    assert len(app["timed_ms"]) == 3 and app["classes"][2]["convolution"] > 0.3, app["classes"]
    assert all(n["us"][2] == 0 for n in workload["nodes"])  # its own ops: by class only
    args = ["--clusters", "6", "--timings", "1", "--refits", "0", "--local-refits", "0"]
    out = cli("synth", "generate", str(w), "-o", str(s), *args)
    assert out.returncode in (0, 1), out.stderr[-3000:]
    [net] = json.loads(s.with_suffix(".json").read_text())["networks"]
    assert len(net["timed_ms"]) == len(net["measured_divergence"]) == 3 and min(net["timed_ms"]) > 0
    assert len(net["measured_ratio_miss"]) == 2  # the score's ratio to PyTorch is judged too
    # Fitted to the application's total time there, not to PyTorch's class shares: the
    # self-check reads the ONNX references alone, and the report says which went unchecked.
    assert net["shares_fitted"] == [True, True, False]
    checked = max(net["predicted_divergence"][:2])
    assert net["self_check"] == ("ok" if checked <= DIVERGENCE_LIMIT else "over the limit")
    assert re.search(r"predicted [0-9.]+, [0-9.]+, [0-9.]+ \(time only\) \(limit", out.stdout), out.stdout
    ran = [u for u in net["units"] if u["count"]]
    assert ran and all(u["cost_us"][2] > 0 for u in ran)  # each found in PyTorch's profile
    # Profiled as the scoped version, timed (and validated) as the plain one, which has no
    # ranges of its own: its trace is the version validate runs.
    on_pytorch = [line for line in out.stderr.splitlines() if line.endswith("on pytorch")]
    assert "profile fit-1-scoped.pt at batch 1, 1 thread, on pytorch" in on_pytorch, on_pytorch
    assert "profile s-scoped.pt at batch 1, 1 thread, on pytorch" in on_pytorch, on_pytorch
    assert all("-scoped.pt" in line for line in on_pytorch) and (tmp_path / "s.pt").is_file()
    assert not (tmp_path / "s-scoped.pt").exists()  # made in scratch for the second profile
    import torch

    plain = str(torch.jit.load(str(tmp_path / "s.pt")).graph)
    assert "record_function" not in plain and "aten::" in plain
    # A reference there needs every application by name; a backend with no profiled
    # version, or a build on a native backend, is refused in one line before anything runs.
    lenet = str(tmp_path / "lenet5.onnx")  # the export profile made: a file, not a name
    refused = tmp_path / "refused"  # where lenet5 by name would be exported first
    got = cli(
        "synth",
        "profile",
        "lenet5",
        lenet,
        "--reference",
        "1x1,4x1,1x1@pytorch",
        "-o",
        str(refused / "w.json"),
    )
    assert_usage_error(got, "--reference 1x1@pytorch: pytorch runs the applications by the names they were")
    assert "lenet5.onnx has none" in got.stderr and not refused.exists()
    for refs, said in (
        (
            "1x1,4x1,1x1@tensorflow",
            "no backend tensorflow profiles ONNX files or the network's framework version",
        ),
        ("1x1,4x1,1x1:int8@pytorch", "pytorch runs the applications by name and the network's own version"),
    ):
        assert_usage_error(cli("synth", "profile", "lenet5", "--reference", refs), said)


@pytest.mark.pytorch
def test_the_scoped_version_tells_each_ops_time_to_the_unit_of_its_node(tmp_path):
    """Every op of the scoped TorchScript version runs in its ONNX node's range, so the
    PyTorch profile's nodes carry the names ONNX Runtime's do and ``unit_costs`` finds
    each unit's instances there; the version bench times has no ranges."""
    import torch

    from dlbench.harness.profile.torch_cell import SCOPE, node_times
    from dlbench.harness.synth.torch_net import convert

    made = lanes()
    units, counts = [u for u, _ in made], [n for _, n in made]
    path = tmp_path / "n.onnx"
    onnx.save(emit.network(made, seed=0), str(path))
    convert(str(path), str(tmp_path / "plain.pt"))
    convert(str(path), str(tmp_path / "scoped.pt"), scoped=True)
    x, scoped = torch.randn(2, width(str(path))), torch.jit.load(str(tmp_path / "scoped.pt"))
    for _ in range(3):  # the executor's own first runs, as a profile's warm-up
        scoped(x)
    with torch.profiler.profile() as prof, torch.profiler.record_function("dlbench.run"):
        scoped(x)
    nodes = node_times(prof.events(), cuda=False)
    named = {n["node"].split("/")[0] for n in nodes}
    assert named <= {n.name for n in onnx.load(str(path)).graph.node}, named
    assert [n["at"] for n in sorted(nodes, key=lambda n: n["at"])] == list(range(len(nodes)))
    by_class, own = unit_costs(units, [{"nodes": nodes}], counts)
    # Every unit's time found, in its own class (the recurrent ones' fused kernels too);
    # the depthwise 1x1 convolution's in a batch norm's, the op it runs as there.
    per_channel = [u.op == "Conv" and u.attrs["kernel_shape"] == [1, 1] for u in units]
    assert all(c > 0 for c, p in zip(own[0], per_channel) if not p), list(zip(units, own[0]))
    assert all(
        c.get("normalization", 0) > 0 and o == 0 for c, o, p in zip(by_class[0], own[0], per_channel) if p
    )
    assert all(sum(c.values()) >= o for c, o in zip(by_class[0], own[0]))
    assert SCOPE not in str(torch.jit.load(str(tmp_path / "plain.pt")).graph)
