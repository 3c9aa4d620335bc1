"""Six convolutional light-zoo models through every command (``lightzoo``)."""

import pytest

from tests.utils import lightzoo


@pytest.mark.parametrize(
    "name", ["squeezenet", "shufflenet", "inception_v1", "inception_v2", "densenet121", "resnet50"]
)
def test_every_command_on_a_light_model(cli, workdir, name):
    recs = lightzoo.run_through(cli, workdir, name)
    assert recs["bench"]["throughput_sps"] > 0
