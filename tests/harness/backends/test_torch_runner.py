"""PyTorch's runner options that change a figure without changing a result: each must do
what its name says (the search in ``dlbench tune`` picks among them by speed alone)."""

import numpy as np
import pytest

from dlbench.models.registry import get_model


@pytest.mark.pytorch
def test_channels_last_puts_weights_and_images_in_nhwc_and_changes_no_output():
    import torch

    from dlbench.harness.backends import get_backend
    from dlbench.harness.backends.base import ArtifactRef, RunConfig
    from dlbench.harness.formats import ZOO

    backend = get_backend("pytorch")
    shape = get_model("resnet50-mini").inputs[0].shape
    feeds = {"input": np.random.default_rng(0).standard_normal((2, *shape)).astype(np.float32)}
    logits = {}
    for switch, layout in (("off", torch.contiguous_format), ("on", torch.channels_last)):
        options = backend.resolve_options({"channels_last": switch})
        runner = backend.runner(
            ArtifactRef(None, ZOO, "resnet50-mini"), RunConfig("cpu", "fp32", 1, 1, options=options)
        )
        runner.load()
        (images,) = runner.prepare(feeds)
        weights = [m.weight for m in runner.model.modules() if isinstance(m, torch.nn.Conv2d)]
        assert weights and images.is_contiguous(memory_format=layout)
        assert all(w.is_contiguous(memory_format=layout) for w in weights), switch
        runner.run([images])
        logits[switch] = runner.outputs()["logits"]
    # Same weights (the run's seed), another memory order: the same logits, to rounding.
    np.testing.assert_allclose(logits["on"], logits["off"], rtol=1e-4, atol=1e-5)
