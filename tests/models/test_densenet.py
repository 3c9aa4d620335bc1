"""DenseNet-121: the published size, the walk, the concatenation order, the init every
framework starts from, and MindSpore's ONNX export.

Counts, MACs, output shapes, canonical weight names and a training step of every zoo
family are tests/models/test_models.py's; weight import and export across frameworks
tests/models/test_weights_transfer.py's.  Here the analytic counts are checked against
the numbers torchvision publishes, and the walk conv by conv (harness/micro reads its
output sizes).
"""

import numpy as np
import pytest

from dlbench.models.densenet import walk
from dlbench.models.registry import get_model
from tests.utils import per_framework
from tests.utils.frameworks import frameworks


def test_analytic_counts_are_torchvisions_densenet121():
    spec = get_model("densenet121")
    # torchvision's DenseNet121_Weights: num_params 7,978,856 and "_ops" 2.834 GMACs
    # (conv and classifier multiply-adds; the paper's Fig. 3 rounds it to ~2.9 GFLOPs).
    assert spec.parameter_count == 7_978_856
    assert spec.macs_per_sample == 2_834_161_664
    mini = get_model("densenet121-mini")
    assert (mini.parameter_count, mini.macs_per_sample) == (454_634, 16_263_680)
    assert spec.default_batch_size == 32 and spec.dataset == "ImageNet2012"
    assert spec.inputs[0].shape == (3, 224, 224) and spec.num_classes == 1000
    assert (mini.default_batch_size, mini.inputs[0].shape) == (16, (3, 64, 64))
    # 120 convolutions and the classifier: the "121" in the name.
    assert sum(op[0] in ("conv", "fc") for op in walk(spec.config)) == 121


@pytest.mark.parametrize("framework", frameworks())
def test_starts_from_torchvisions_init(framework):
    w = per_framework.weights(framework).export_weights(
        get_model("densenet121-mini").build(framework, seed=0)
    )
    conv = w["block3.layer24.conv1.weight"]  # 248 x 32 x 1 x 1 (PyTorch's layout): fan_in 248
    assert abs(conv.std() / np.sqrt(2 / 248) - 1) < 0.1
    bns = {k[: -len(".running_var")] for k in w if k.endswith(".running_var")}
    assert all((w[f"{b}.weight"] == 1).all() and not w[f"{b}.bias"].any() for b in bns)
    assert not w["fc.bias"].any() and np.abs(w["fc.weight"]).max() <= 1 / np.sqrt(256)


# --- PyTorch: the walk against the running network, and the concatenation ------------------


@pytest.mark.pytorch
def test_walk_lists_every_conv_in_network_order_with_its_output_size():
    """What harness/micro reads off the walk: channels, kernel, stride and output size."""
    import torch
    from torch import nn

    spec = get_model("densenet121-mini")
    net = spec.build("pytorch", seed=0).eval()
    seen = []
    hooks = [
        m.register_forward_hook(
            lambda m, _i, out: seen.append(
                ("conv", m.in_channels, m.out_channels, m.kernel_size[0], m.stride[0], out.shape[-1])
            )
        )
        for m in net.modules()
        if isinstance(m, nn.Conv2d)
    ]
    with torch.no_grad():
        net(torch.zeros(1, 3, 64, 64))
    for h in hooks:
        h.remove()
    assert seen == [op for op in walk(spec.config) if op[0] == "conv"]


@pytest.mark.pytorch
def test_a_dense_layer_keeps_its_input_first():
    """cat([input, new]): the channel order each later bn1 gamma is matched to."""
    import torch

    spec = get_model("densenet121-mini")
    layer = spec.build("pytorch", seed=0).eval().block2.layer3
    x = torch.randn(2, layer.bn1.num_features, 8, 8)
    with torch.no_grad():
        y = layer(x)
    assert y.shape[1] == x.shape[1] + spec.config["growth_rate"]
    assert torch.equal(y[:, : x.shape[1]], x)


# --- MindSpore: the ONNX exporter's pool rewrite --------------------------------------------


@pytest.mark.mindspore
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
