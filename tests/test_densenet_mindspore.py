"""DenseNet-121 in MindSpore: its init and the ONNX exporter's pool rewrite.

Counts, MACs, canonical weight names and a training step of every zoo family are
tests/models/test_models.py's; weight import and export across frameworks
tests/models/test_weights_transfer.py's.
"""

import numpy as np

from dlbench.models.registry import get_model
from dlbench.models.weights.mindspore import export_weights


def test_starts_from_torchvisions_init():
    w = export_weights(get_model("densenet121-mini").build("mindspore", seed=0))
    conv = w["block3.layer24.conv1.weight"]  # fan_in 248
    assert abs(conv.std() / np.sqrt(2 / 248) - 1) < 0.1
    bns = {k[: -len(".running_var")] for k in w if k.endswith(".running_var")}
    assert all((w[f"{b}.weight"] == 1).all() and not w[f"{b}.bias"].any() for b in bns)
    assert not w["fc.bias"].any() and np.abs(w["fc.weight"]).max() <= 1 / np.sqrt(256)


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
