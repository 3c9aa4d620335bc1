"""The three light-zoo models whose fully connected layers hold most of their weights
(hundreds of MB once folded), in a file of their own so they run beside the others."""
import pytest

import lightzoo


@pytest.mark.parametrize("name", ["bvlc_alexnet", "zfnet512", "vgg19"])
def test_every_command_on_a_light_model(cli, workdir, name):
    recs = lightzoo.run_through(cli, workdir, name)
    assert recs["bench"]["throughput_sps"] > 0
