"""DenseNet-121 in MindSpore: its init, a compiled training step and
the ONNX exporter's pool rewrite.

Counts, MACs and canonical weight names of every zoo model are tests/test_models.py's, weight
import and export across frameworks tests/test_weights_transfer.py's.
"""
import numpy as np
import mindspore as ms
from mindspore import nn

from dlbench.models.registry import get_model
from dlbench.models.weights.mindspore import export_weights


def test_starts_from_torchvisions_init():
    w = export_weights(get_model("densenet121-mini").build("mindspore", seed=0))
    conv = w["block3.layer24.conv1.weight"]            # fan_in 248
    assert abs(conv.std() / np.sqrt(2 / 248) - 1) < 0.1
    bns = {k[: -len(".running_var")] for k in w if k.endswith(".running_var")}
    assert all((w[f"{b}.weight"] == 1).all() and not w[f"{b}.bias"].any() for b in bns)
    assert not w["fc.bias"].any() and np.abs(w["fc.weight"]).max() <= 1 / np.sqrt(256)


def test_a_graph_mode_training_step_moves_weights_and_bn_statistics():
    """GRAPH_MODE, as dlbench train runs it: construct must compile."""
    spec = get_model("densenet121-mini")
    net = spec.build("mindspore", seed=0)
    before = export_weights(net)
    mode = ms.get_context("mode")
    try:
        ms.set_context(mode=ms.GRAPH_MODE)
        step = nn.TrainOneStepCell(
            nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")),
            nn.Momentum(net.trainable_params(), learning_rate=0.1, momentum=0.9))
        step.set_train()
        x = np.random.default_rng(0).standard_normal((4, 3, 64, 64)).astype(np.float32)
        loss = step(ms.Tensor(x), ms.Tensor(np.array([0, 1, 2, 3], np.int32)))
    finally:
        ms.set_context(mode=mode)
    assert np.isfinite(loss.asnumpy())
    after = export_weights(net)
    assert {k for k in before if not np.array_equal(before[k], after[k])} == set(before)


def test_exports_to_onnx(tmp_path):
    """MindSpore's ONNX exporter cannot convert the padded stem pool (MaxPool3DWithArgmax);
    the converter rewrites it, and the transitions' unpadded average pools need nothing."""
    from dlbench.converters.base import ExportOptions
    from dlbench.converters.mindspore_to_onnx import HOP
    spec = get_model("densenet121-mini")
    out = tmp_path / "model.onnx"
    record = HOP.export(spec.build("mindspore", seed=0), spec, out, ExportOptions())
    assert out.stat().st_size > 0
    assert [r.split(":")[0] for r in record["rewrites"]] == ["stem.pool"]
