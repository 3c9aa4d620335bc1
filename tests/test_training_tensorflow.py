"""TensorFlow/Keras-specific checks: the built network is the spec's network, and it trains.

Everything runs the real framework on resnet50-mini, except one cheap batch-1
pass over the full ResNet-50 to prove the full-size builder is right too.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.tensorflow
import keras
import tensorflow as tf

from dlbench.core.errors import UserError
from dlbench.harness.training import loop
from dlbench.harness.training.base import TrainConfig
from dlbench.harness.training.tensorflow import Session
from dlbench.models import synthetic
from dlbench.models.counting.tensorflow import forward_macs, trainable_parameters
from dlbench.models.registry import get_model
from dlbench.models.resnet import multiply_adds, parameter_count, walk
from tests.utils import ROOT

MINI = "resnet50-mini"
HAS_GPU = bool(tf.config.list_physical_devices("GPU"))


def _cfg(**kw) -> TrainConfig:
    # TensorFlow's thread pools are fixed once per process; ask for what is in
    # force so sessions after the first test don't warn.  The fresh-process
    # test below checks that a requested setting is really applied.
    threading = tf.config.threading
    base = dict(
        model=MINI,
        framework="tensorflow",
        batch_size=16,
        steps=15,
        warmup_steps=3,
        learning_rate=0.05,
        intra_op_threads=threading.get_intra_op_parallelism_threads(),
        inter_op_threads=threading.get_inter_op_parallelism_threads(),
    )
    return TrainConfig(**{**base, **kw})


def _session(**kw) -> Session:
    cfg = _cfg(**kw)
    spec = get_model(cfg.model)
    return Session(
        spec, cfg, synthetic.image_batches(spec, cfg.batch_size, 2, seed=cfg.seed, layout=Session.layout)
    )


def _walk_names(layers):
    """Layer names in ``walk`` order, as the builders name them."""
    yield from ("stem.conv", "stem.bn")
    for stage, blocks in enumerate(layers):
        for b in range(blocks):
            p = f"layer{stage + 1}.{b}"
            yield from (f"{p}.conv1", f"{p}.bn1", f"{p}.conv2", f"{p}.bn2", f"{p}.conv3", f"{p}.bn3")
            if b == 0:
                yield from (f"{p}.downsample.conv", f"{p}.downsample.bn")
    yield "fc"


def test_mini_counts_match_spec():
    spec = get_model(MINI)
    model = spec.build("tensorflow")
    assert trainable_parameters(model) == parameter_count(spec) == 376_722
    assert forward_macs(model, spec) == multiply_adds(spec) == 6_269_440


def test_full_resnet50_counts_and_output_shape():
    spec = get_model("resnet50")
    model = spec.build("tensorflow")
    assert trainable_parameters(model) == parameter_count(spec) == 25_557_032
    assert forward_macs(model, spec) == multiply_adds(spec) == 4_089_184_256
    out = model(np.zeros((1, 224, 224, 3), np.float32), training=False)
    assert tuple(out.shape) == (1, 1000)


def test_named_layers_match_walk():
    spec = get_model(MINI)
    model = spec.build("tensorflow")
    weighted = [op for op in walk(spec.config) if op[0] != "pool"]  # pools have no name
    for name, op in zip(_walk_names(spec.config["layers"]), weighted, strict=True):
        layer = model.get_layer(name)
        if op[0] == "conv":
            _, cin, cout, k, stride, hw = op
            assert isinstance(layer, keras.layers.Conv2D) and not layer.use_bias
            assert tuple(layer.kernel.shape) == (k, k, cin, cout) and layer.strides == (stride,) * 2
            assert tuple(layer.output.shape[1:3]) == (hw, hw)
        elif op[0] == "bn":
            assert isinstance(layer, keras.layers.BatchNormalization)
            assert tuple(layer.gamma.shape) == (op[1],)
            assert layer.epsilon == 1e-5 and layer.momentum == 0.9
        else:
            assert isinstance(layer, keras.layers.Dense)
            assert tuple(layer.kernel.shape) == (op[1], op[2]) and layer.use_bias


def test_seed_makes_initial_weights_reproducible():
    spec = get_model(MINI)
    a, b, c = ([w.numpy() for w in spec.build("tensorflow", seed=s).weights] for s in (3, 3, 4))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])


@pytest.mark.parametrize("seed", [0, 1])
def test_loss_falls_through_shared_loop(tmp_path, seed):
    result = loop.run(_cfg(seed=seed), tmp_path)
    losses = result["losses"]
    assert len(losses) == 18 and all(math.isfinite(x) for x in losses)
    # Measured over seeds 0-9: the last 3 average < 0.15x the first 3; 0.5 leaves margin.
    assert np.mean(losses[-3:]) < 0.5 * np.mean(losses[:3])
    assert result["checkpoint"] == "model.keras" and (tmp_path / "model.keras").is_file()
    rt = result["runtime"]
    assert rt["device"].endswith("CPU:0") and rt["data_device"].endswith("CPU:0")
    assert rt["dtype_policy"] == "float32"


def test_checkpoint_reloads_into_fresh_model(tmp_path):
    session = _session(seed=5)
    for i in range(3):
        session.step(i)
    name = session.save(tmp_path)
    assert name.endswith(Session.checkpoint_suffix)
    (x,) = session.batches[0][0]  # inputs: a tuple, one tensor per model input
    expected = session.model(x, training=False).numpy()
    loaded = keras.models.load_model(tmp_path / name)
    np.testing.assert_array_equal(loaded(x, training=False).numpy(), expected)
    # Same names, so the weights also load into a freshly built network.
    fresh = get_model(MINI).build("tensorflow", seed=99)
    fresh.load_weights(tmp_path / name)
    np.testing.assert_array_equal(fresh(x, training=False).numpy(), expected)


def test_cpu_amp_uses_bfloat16_with_float32_logits():
    session = _session(precision="amp")
    assert math.isfinite(session.step(0))
    assert session.runtime()["dtype_policy"] == "mixed_bfloat16"
    assert session.model.get_layer("stem.conv").compute_dtype == "bfloat16"
    assert session.model(session.batches[0][0][0], training=False).dtype == tf.float32
    assert keras.mixed_precision.global_policy().name == "float32"  # restored


def test_ascend_is_refused():
    with pytest.raises(UserError, match="ascend"):
        _session(device="ascend")


def test_unknown_precision_is_refused():
    with pytest.raises(UserError, match="precision"):
        _session(precision="int8")


@pytest.mark.skipif(HAS_GPU, reason="TensorFlow sees a GPU here")
def test_gpu_without_gpu_is_refused():
    with pytest.raises(UserError, match="sees no GPU"):
        _session(device="gpu")


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="TensorFlow sees no GPU")
@pytest.mark.parametrize("precision", ["fp32", "amp"])
def test_gpu_session_trains_on_gpu(tmp_path, precision):
    result = loop.run(_cfg(device="gpu", precision=precision), tmp_path)
    rt = result["runtime"]
    assert rt["device"].endswith("GPU:0") and rt["data_device"].endswith("GPU:0")
    assert rt["loss_scaling"] == (precision == "amp")
    assert np.mean(result["losses"][-3:]) < 0.5 * np.mean(result["losses"][:3])


def test_threads_are_applied_in_a_fresh_process():
    code = (
        "import json\n"
        "from dlbench.harness.training.base import TrainConfig\n"
        "from dlbench.harness.training.tensorflow import Session\n"
        "from dlbench.models import synthetic\n"
        "from dlbench.models.registry import get_model\n"
        f"spec = get_model({MINI!r})\n"
        f"cfg = TrainConfig(model={MINI!r}, framework='tensorflow', batch_size=2, steps=1,\n"
        "                  intra_op_threads=1, inter_op_threads=2)\n"
        "s = Session(spec, cfg, synthetic.image_batches(spec, 2, 1, layout='NHWC'))\n"
        "print(json.dumps(s.runtime()))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert proc.returncode == 0, proc.stderr
    rt = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rt["threads_applied"] and (rt["intra_op_threads"], rt["inter_op_threads"]) == (1, 2)


def test_threads_in_force_are_reported_when_they_cannot_change():
    tf.constant(1.0) + 1  # make sure the runtime has started
    in_force = _cfg().intra_op_threads
    with pytest.warns(RuntimeWarning, match="already initialized"):
        session = _session(intra_op_threads=in_force + 1)
    rt = session.runtime()
    assert not rt["threads_applied"] and rt["intra_op_threads"] == in_force


def test_plain_reference_loop_prints_one_json_line():
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "plain_train_tensorflow.py"),
            "--model",
            MINI,
            "--batch-size",
            "4",
            "--steps",
            "2",
            "--warmup-steps",
            "1",
            "--threads",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["steps"] == 2 and out["throughput_sps"] > 0 and out["window_s"] > 0
