"""GoogLeNet in PyTorch, and the canonical-weights machinery's refusals.

Parameter counts, MACs and output shapes of every zoo model against the
analytic walk are tests/models/test_models.py's; here: the published size, the
canonical layer names, and the ways ``import_weights`` must refuse weights.
"""

import numpy as np
import pytest
from torch import nn

from dlbench.models import weights as canonical
from dlbench.models.counting.pytorch import forward_macs, trainable_parameters
from dlbench.models.googlenet import canonical_shapes
from dlbench.models.registry import get_model
from dlbench.models.weights.pytorch import export_weights, import_weights


def test_analytic_counts_are_the_cifar_googlenet():
    spec = get_model("googlenet")
    # kuangliu/pytorch-cifar's GoogLeNet has 6,166,250 with its 7,904 conv biases.
    assert spec.parameter_count == 6_166_250 - 7_904 == 6_158_346
    assert spec.macs_per_sample == 1_521_756_160
    mini = get_model("googlenet-mini")
    assert (mini.parameter_count, mini.macs_per_sample) == (99_650, 24_359_168)
    assert spec.default_batch_size == 128 and spec.dataset == "CIFAR-10"
    assert spec.inputs[0].shape == (3, 32, 32) and spec.network_type == "CNN"


def test_full_size_network_matches_the_walk():
    spec = get_model("googlenet")
    net = spec.build("pytorch", seed=0)
    assert trainable_parameters(net) == 6_158_346
    assert forward_macs(net, spec) == spec.macs_per_sample


@pytest.mark.parametrize("name", ["googlenet-mini", "googlenet"])
def test_exports_the_canonical_names_and_shapes(name):
    spec = get_model(name)
    w = export_weights(spec.build("pytorch", seed=0))
    assert {k: v.shape for k, v in w.items()} == canonical_shapes(spec.config)
    assert all(v.dtype == np.float32 for v in w.values())


@pytest.fixture
def mini():
    spec = get_model("googlenet-mini")
    return spec, spec.build("pytorch", seed=0), export_weights(spec.build("pytorch", seed=1))


def test_import_replaces_every_weight(mini):
    _, net, w = mini
    import_weights(net, w)
    back = export_weights(net)
    assert all(np.array_equal(back[k], w[k]) for k in w)


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda w: w.pop("inception4a.branch3.2.bn.running_var"), "have no canonical array"),
        (lambda w: w.__setitem__("fc.extra", np.zeros(3, np.float32)), "match no pytorch"),
        (lambda w: w.__setitem__("fc.weight", np.zeros((10, 3), np.float32)), "does not fit"),
    ],
)
def test_mismatched_weights_are_refused_and_nothing_is_written(mini, damage, message):
    _, net, w = mini
    before = export_weights(net)
    damage(w)
    with pytest.raises(canonical.WeightMismatch, match=message):
        import_weights(net, w)
    after = export_weights(net)
    assert all(np.array_equal(before[k], after[k]) for k in before)


def test_a_weighted_layer_without_a_rule_is_an_error():
    net = nn.Sequential(nn.Linear(2, 3), nn.Bilinear(3, 3, 2))
    with pytest.raises(canonical.WeightMismatch, match="no pytorch weight rule.*Bilinear"):
        export_weights(net)


def test_weights_files_round_trip_and_bad_files_are_user_errors(tmp_path, mini):
    _, _, w = mini
    path = canonical.save(tmp_path / "w.npz", w, model="googlenet-mini", framework="pytorch")
    loaded, meta = canonical.load(path)
    assert list(loaded) == list(w) and meta["model"] == "googlenet-mini"
    assert all(np.array_equal(loaded[k], w[k]) for k in w)
    (tmp_path / "bad.npz").write_text("not a zip")
    for bad in (tmp_path / "bad.npz", tmp_path / "missing.npz"):
        with pytest.raises(canonical.UserError):
            canonical.load(bad)
