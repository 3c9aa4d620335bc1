"""What is specific to MindSpore: the network's counts, training through the
shared loop, the .ckpt round trip and refusing devices this build cannot use.

Real MindSpore throughout (no mocks).  Graph compilation dominates the cost,
so the trained session is built once per module.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.mindspore
os.environ.setdefault("GLOG_v", "3")
import mindspore as ms

from dlbench.core.errors import UserError
from dlbench.harness.training import loop
from dlbench.harness.training.base import TrainConfig
from dlbench.harness.training.mindspore import Session
from dlbench.models import synthetic
from dlbench.models.counting.mindspore import forward_macs, trainable_parameters
from dlbench.models.registry import get_model
from dlbench.models.resnet import multiply_adds, parameter_count
from tests.utils import ROOT

MINI = "resnet50-mini"


def _cfg(**kw) -> TrainConfig:
    base = dict(
        model=MINI, framework="mindspore", batch_size=16, steps=15, warmup_steps=2, learning_rate=0.05, seed=0
    )
    return TrainConfig(**{**base, **kw})


@contextlib.contextmanager
def _pynative():
    """Single forwards run op by op: compiling a graph for each would cost seconds."""
    mode = ms.get_context("mode")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    try:
        yield
    finally:
        ms.set_context(mode=mode)


def _eval_logits(net, x: np.ndarray) -> np.ndarray:
    net.set_train(False)
    with _pynative():
        return net(ms.Tensor(x)).asnumpy()


def test_mini_counts_match_the_analytic_ones():
    spec = get_model(MINI)
    net = spec.build("mindspore", seed=0)
    assert trainable_parameters(net) == parameter_count(spec) == 376_722
    assert forward_macs(net, spec) == multiply_adds(spec) == 6_269_440


def test_full_resnet50_counts_and_output_shape():
    spec = get_model("resnet50")
    net = spec.build("mindspore", seed=0)
    assert trainable_parameters(net) == parameter_count(spec) == 25_557_032
    assert forward_macs(net, spec) == multiply_adds(spec) == 4_089_184_256
    out = _eval_logits(net, np.zeros((1, 3, 224, 224), np.float32))
    assert out.shape == (1, 1000)


def test_layer_names_follow_the_walk_order():
    names = [p.name for p in get_model(MINI).build("mindspore", seed=0).trainable_params()]
    assert names[:3] == ["stem.conv.weight", "stem.bn.gamma", "stem.bn.beta"]
    assert "layer1.0.downsample.conv.weight" in names and "layer4.2.bn3.gamma" in names
    assert names[-2:] == ["fc.weight", "fc.bias"]


def test_seed_fixes_initial_weights():
    spec = get_model(MINI)
    a = spec.build("mindspore", seed=3).stem.conv.weight.asnumpy()
    b = spec.build("mindspore", seed=3).stem.conv.weight.asnumpy()
    c = spec.build("mindspore", seed=4).stem.conv.weight.asnumpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("ms-run")
    return loop.run(_cfg(), out), out


def test_loss_falls_through_the_shared_loop(trained):
    result, _ = trained
    losses = result["losses"]
    assert len(losses) == 17 and all(math.isfinite(v) for v in losses)
    first, last = np.mean(losses[:3]), np.mean(losses[-3:])
    assert last < 0.7 * first, losses
    rt = result["runtime"]
    assert rt["device"] == "CPU" and rt["mode"] == "GRAPH_MODE"
    assert rt["intra_op_threads"] is not None and rt["inter_op_threads"] is not None
    assert result["framework_version"].startswith("2.8")


def test_checkpoint_is_written_and_complete(trained):
    result, out = trained
    assert result["checkpoint"] == "model.ckpt"
    params = ms.load_checkpoint(str(out / "model.ckpt"))
    fresh = get_model(MINI).build("mindspore", seed=1)
    not_loaded, unused = ms.load_param_into_net(fresh, params)
    assert not not_loaded and not unused
    assert {"stem.bn.moving_mean", "fc.weight"} <= set(params)


def test_checkpoint_reloads_to_identical_outputs(tmp_path):
    spec = get_model(MINI)
    batches = synthetic.image_batches(spec, 8, 1, seed=5)
    session = Session(spec, _cfg(batch_size=8), batches)
    session.step(0)  # move weights and BN statistics off their init
    session.save(tmp_path)
    fresh = spec.build("mindspore", seed=1)
    x = batches[0][0]
    assert not np.allclose(_eval_logits(fresh, x), _eval_logits(session.model, x))
    not_loaded, _ = ms.load_param_into_net(fresh, ms.load_checkpoint(str(tmp_path / "model.ckpt")))
    assert not not_loaded
    np.testing.assert_array_equal(_eval_logits(fresh, x), _eval_logits(session.model, x))


def _available(device: str) -> bool:
    return getattr(ms.device_context, device).is_available()


# The ids avoid the bare words "gpu"/"ascend": conftest skips tests with those keywords.
@pytest.mark.parametrize("device", ["gpu", "ascend"], ids=["to-gpu", "to-ascend"])
def test_unusable_device_is_a_user_error(device):
    if _available(device):
        pytest.skip(f"this MindSpore can use {device}")
    with pytest.raises(UserError, match=f"--device {device}"):
        Session(get_model(MINI), _cfg(device=device), [])


def test_unknown_precision_is_a_user_error():
    with pytest.raises(UserError, match="--precision"):
        Session(get_model(MINI), _cfg(precision="fp8"), [])


def test_amp_trains_in_float16_on_cpu_and_saves_plain_names(tmp_path):
    spec = get_model(MINI)
    session = Session(spec, _cfg(precision="amp"), synthetic.image_batches(spec, 16, 2, seed=0))
    losses = [session.step(i) for i in range(3)]
    assert all(math.isfinite(v) for v in losses)
    assert session.runtime()["amp_dtype"] == "Float16"
    session.save(tmp_path)
    params = ms.load_checkpoint(str(tmp_path / "model.ckpt"))
    not_loaded, unused = ms.load_param_into_net(spec.build("mindspore", seed=1), params)
    assert not not_loaded and not unused
    assert {str(p.dtype) for p in params.values()} == {"Float32"}


@pytest.mark.gpu
@pytest.mark.skipif(not _available("gpu"), reason="MindSpore sees no usable GPU")
def test_gpu_session_trains(tmp_path):
    # Its own process: MindSpore's device is fixed once per process, and the
    # tests above have already put this one on the CPU.
    code = (
        "import json, sys; from pathlib import Path; from dlbench.harness.training import loop; "
        "from dlbench.harness.training.base import TrainConfig; "
        f"r = loop.run(TrainConfig(model={MINI!r}, framework='mindspore', batch_size=16, "
        "steps=3, device='gpu'), Path(sys.argv[1])); "
        "print(json.dumps({'device': r['runtime']['device'], 'losses': r['losses']}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["device"] == "GPU"
    assert all(math.isfinite(v) for v in result["losses"])
