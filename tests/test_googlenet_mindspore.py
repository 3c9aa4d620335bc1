"""GoogLeNet in MindSpore: full-size count, canonical names and ONNX export.

Counts and MACs against the walk, and a graph-mode training step, for every zoo
family are tests/models/test_models.py's.
"""

import numpy as np
import pytest

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
