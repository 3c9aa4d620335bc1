"""GoogLeNet in MindSpore: full-size count, canonical names and a compiled training step.

Counts and MACs against the walk for every zoo model are tests/test_models.py's.
"""
import numpy as np
import pytest
import mindspore as ms
from mindspore import nn

from dlbench.models.counting.mindspore import forward_macs, trainable_parameters
from dlbench.models.googlenet import canonical_shapes
from dlbench.models.registry import get_model
from dlbench.models.weights.mindspore import export_weights, import_weights


def test_full_size_network_matches_the_walk():
    spec = get_model("googlenet")
    net = spec.build("mindspore", seed=0)
    assert trainable_parameters(net) == spec.parameter_count == 6_158_346
    assert forward_macs(net, spec) == spec.macs_per_sample


@pytest.mark.parametrize("name", ["googlenet-mini", "googlenet"])
def test_exports_the_canonical_names_and_shapes(name):
    spec = get_model(name)
    w = export_weights(spec.build("mindspore", seed=0))
    assert {k: v.shape for k, v in w.items()} == canonical_shapes(spec.config)


def test_import_replaces_every_weight():
    spec = get_model("googlenet-mini")
    net = spec.build("mindspore", seed=0)
    w = export_weights(spec.build("mindspore", seed=1))
    import_weights(net, w)
    back = export_weights(net)
    assert all(np.array_equal(back[k], w[k]) for k in w)


def test_a_graph_mode_training_step_moves_weights_and_bn_statistics():
    """GRAPH_MODE, as dlbench train runs it: construct must compile."""
    spec = get_model("googlenet-mini")
    net = spec.build("mindspore", seed=0)
    before = export_weights(net)
    mode = ms.get_context("mode")
    try:
        ms.set_context(mode=ms.GRAPH_MODE)
        step = nn.TrainOneStepCell(
            nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")),
            nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9))
        step.set_train()
        x = np.random.default_rng(0).standard_normal((4, 3, 32, 32)).astype(np.float32)
        loss = step(ms.Tensor(x), ms.Tensor(np.array([0, 1, 2, 3], np.int32)))
    finally:
        ms.set_context(mode=mode)
    assert np.isfinite(loss.asnumpy())
    after = export_weights(net)
    assert {k for k in before if not np.array_equal(before[k], after[k])} == set(before)


def test_exports_to_onnx(tmp_path):
    """MindSpore's ONNX exporter has no MaxPool3DWithArgmax (what pad_mode="pad"
    pools run on); the converter rewrites the top-level pools, and the branch-4
    pools inside SequentialCells must not need it (they are 'same', stride 1)."""
    from dlbench.converters.base import ExportOptions
    from dlbench.converters.mindspore_to_onnx import HOP
    spec = get_model("googlenet-mini")
    out = tmp_path / "model.onnx"
    record = HOP.export(spec.build("mindspore", seed=0), spec, out, ExportOptions())
    assert out.stat().st_size > 0
    assert sorted(r.split(":")[0] for r in record["rewrites"]) == ["maxpool3", "maxpool4"]
