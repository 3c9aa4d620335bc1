"""GoogLeNet (CIFAR): the published size, the canonical layer names in every framework,
and the ways ``import_weights`` must refuse weights.

Parameter counts, MACs and output shapes of every zoo model against the analytic walk
are tests/models/test_models.py's (with a training step); here the full-size network is
held to the walk too, because the zoo test builds it only once per framework, and the
canonical names are checked at both sizes.
"""

import numpy as np
import pytest

from dlbench.models import weights as canonical
from dlbench.models.googlenet import canonical_shapes
from dlbench.models.registry import get_model
from tests.utils import per_framework
from tests.utils.frameworks import frameworks


@pytest.fixture(scope="module")
def full(framework):
    """Full-size GoogLeNet, seed 0: only counted and exported, never changed."""
    return get_model("googlenet").build(framework, seed=0)


def test_analytic_counts_are_the_cifar_googlenet():
    spec = get_model("googlenet")
    # kuangliu/pytorch-cifar's GoogLeNet has 6,166,250 with its 7,904 conv biases.
    assert spec.parameter_count == 6_166_250 - 7_904 == 6_158_346
    assert spec.macs_per_sample == 1_521_756_160
    mini = get_model("googlenet-mini")
    assert (mini.parameter_count, mini.macs_per_sample) == (99_650, 24_359_168)
    assert spec.default_batch_size == 128 and spec.dataset == "CIFAR-10"
    assert spec.inputs[0].shape == (3, 32, 32) and spec.network_type == "CNN"


@pytest.mark.parametrize("framework", frameworks(), scope="module")
def test_full_size_network_matches_the_walk(framework, full):
    spec = get_model("googlenet")
    counting = per_framework.counting(framework)
    assert counting.trainable_parameters(full) == spec.parameter_count == 6_158_346
    assert counting.forward_macs(full, spec) == spec.macs_per_sample


@pytest.mark.parametrize("framework", frameworks(), scope="module")
@pytest.mark.parametrize("name", ["googlenet-mini", "googlenet"])
def test_exports_the_canonical_names_and_shapes(framework, name, request):
    spec = get_model(name)
    net = request.getfixturevalue("full") if name == "googlenet" else spec.build(framework, seed=0)
    w = per_framework.weights(framework).export_weights(net)
    assert {k: v.shape for k, v in w.items()} == canonical_shapes(spec.config)
    assert all(v.dtype == np.float32 for v in w.values())


@pytest.mark.parametrize("framework", frameworks())
def test_import_replaces_every_weight(framework):
    spec = get_model("googlenet-mini")
    weights = per_framework.weights(framework)
    net = spec.build(framework, seed=0)
    w = weights.export_weights(spec.build(framework, seed=1))
    weights.import_weights(net, w)
    back = weights.export_weights(net)
    assert all(np.array_equal(back[k], w[k]) for k in w)


# --- PyTorch: the canonical-weights machinery's refusals and files -------------------------


@pytest.fixture
def mini_pytorch():
    """googlenet-mini in PyTorch (seed 0, changed by the tests) and seed 1's weights."""
    from dlbench.models.weights.pytorch import export_weights

    spec = get_model("googlenet-mini")
    return spec, spec.build("pytorch", seed=0), export_weights(spec.build("pytorch", seed=1))


@pytest.mark.pytorch
@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda w: w.pop("inception4a.branch3.2.bn.running_var"), "have no canonical array"),
        (lambda w: w.__setitem__("fc.extra", np.zeros(3, np.float32)), "match no pytorch"),
        (lambda w: w.__setitem__("fc.weight", np.zeros((10, 3), np.float32)), "does not fit"),
    ],
)
def test_mismatched_weights_are_refused_and_nothing_is_written(mini_pytorch, damage, message):
    from dlbench.models.weights.pytorch import export_weights, import_weights

    _, net, w = mini_pytorch
    before = export_weights(net)
    damage(w)
    with pytest.raises(canonical.WeightMismatch, match=message):
        import_weights(net, w)
    after = export_weights(net)
    assert all(np.array_equal(before[k], after[k]) for k in before)


@pytest.mark.pytorch
def test_a_weighted_layer_without_a_rule_is_an_error():
    from torch import nn

    from dlbench.models.weights.pytorch import export_weights

    net = nn.Sequential(nn.Linear(2, 3), nn.Bilinear(3, 3, 2))
    with pytest.raises(canonical.WeightMismatch, match="no pytorch weight rule.*Bilinear"):
        export_weights(net)


@pytest.mark.pytorch
def test_weights_files_round_trip_and_bad_files_are_user_errors(tmp_path, mini_pytorch):
    _, _, w = mini_pytorch
    path = canonical.save(tmp_path / "w.npz", w, model="googlenet-mini", framework="pytorch")
    loaded, meta = canonical.load(path)
    assert list(loaded) == list(w) and meta["model"] == "googlenet-mini"
    assert all(np.array_equal(loaded[k], w[k]) for k in w)
    (tmp_path / "bad.npz").write_text("not a zip")
    for bad in (tmp_path / "bad.npz", tmp_path / "missing.npz"):
        with pytest.raises(canonical.UserError):
            canonical.load(bad)


# --- MindSpore: the ONNX exporter ----------------------------------------------------------


@pytest.mark.mindspore
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
