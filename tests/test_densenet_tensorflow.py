"""DenseNet-121 in Keras 3 (NHWC): its init.

Counts, MACs, canonical weight names and a training step of every zoo family are
tests/models/test_models.py's; weight import and export across frameworks
tests/models/test_weights_transfer.py's.
"""

import numpy as np

from dlbench.models.registry import get_model
from dlbench.models.weights.tensorflow import export_weights


def test_starts_from_torchvisions_init():
    w = export_weights(get_model("densenet121-mini").build("tensorflow", seed=0))
    conv = w["block3.layer24.conv1.weight"]  # fan_in 248, as in PyTorch's layout
    assert abs(conv.std() / np.sqrt(2 / 248) - 1) < 0.1
    bns = {k[: -len(".running_var")] for k in w if k.endswith(".running_var")}
    assert all((w[f"{b}.weight"] == 1).all() and not w[f"{b}.bias"].any() for b in bns)
    assert not w["fc.bias"].any() and np.abs(w["fc.weight"]).max() <= 1 / np.sqrt(256)
