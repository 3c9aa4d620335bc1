"""The synthetic network's Keras version: the same units, counts and order in Keras's own
layers, a .keras file that loads without our code and runs at any batch."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from dlbench.harness.synth import emit
from tests.utils.synthlanes import lanes

pytestmark = pytest.mark.tensorflow


def test_the_keras_version_has_the_units_and_runs_at_any_batch(tmp_path):
    import keras

    from dlbench.harness.synth.keras_net import convert

    path = tmp_path / "synthetic.onnx"
    onnx.save(emit.network(lanes(), seed=1), str(path))
    done = convert(str(path), str(tmp_path / "synthetic.keras"))
    model = keras.models.load_model(str(tmp_path / "synthetic.keras"))
    kinds = [type(layer).__name__ for layer in model.layers]
    assert kinds.count("Conv2D") == 3 and kinds.count("DepthwiseConv2D") == 2 and kinds.count("Dense") == 2
    assert kinds.count("Bidirectional") == 1 and "MaxPooling2D" in kinds
    assert done["parameters"] == model.count_params() > 0
    y = model(np.random.default_rng(0).standard_normal((5, model.inputs[0].shape[1])).astype("float32"))
    assert tuple(y.shape) == (5, 1) and np.isfinite(np.asarray(y)).all()
