"""A light-zoo model whose fully connected layers hold most of its weights (hundreds of MB
once folded), in a file of its own so it runs beside the others.

AlexNet stands for the three such models the onnx wheel ships: ZFNet-512 and VGG-19
have the same ops and the same traits (opset 9, weights as ConstantOfShape outputs
and graph inputs, batch fixed at 1), only more of them, and took 3.4 minutes of
the suite's 2 cores between them for no path AlexNet does not take."""

import pytest

from tests.utils import lightzoo


@pytest.mark.parametrize("name", ["bvlc_alexnet"])
def test_every_command_on_a_light_model(cli, workdir, name):
    recs = lightzoo.run_through(cli, workdir, name)
    assert recs["bench"]["throughput_sps"] > 0
