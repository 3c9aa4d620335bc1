"""Each framework's training session: the built network is the spec's network, and it trains.

Everything runs the real framework (no mocks) on resnet50-mini, except one cheap batch-1
pass over the full ResNet-50 to prove the full-size builder is right too.  Every group
collects this module, so a framework is imported only inside a test or fixture; an
absent framework fails its tests there (CI installs all three), it never skips them.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from dlbench.core.errors import UserError
from dlbench.harness.training import loop
from dlbench.harness.training.base import TrainConfig
from dlbench.models import synthetic
from dlbench.models.registry import get_model
from dlbench.models.resnet import multiply_adds, parameter_count, walk
from tests.utils import ROOT
from tests.utils.frameworks import frameworks

MINI = "resnet50-mini"

# How far the loss falls: the last 3 steps' mean below this share of the first 3's.
# Measured over seeds 0-9, PyTorch's fell below 0.2x and TensorFlow's below 0.15x;
# the bounds leave margin.
LOSS_RATIO = {"pytorch": 0.6, "tensorflow": 0.5, "mindspore": 0.7}
# MindSpore compiles a graph per run, which dominates its cost: one seed.
SEEDS = {"pytorch": (0, 1, 2), "tensorflow": (0, 1), "mindspore": (0,)}
CHECKPOINT = {"pytorch": "model.pt", "tensorflow": "model.keras", "mindspore": "model.ckpt"}


def _session_class(framework: str):
    return importlib.import_module(f"dlbench.harness.training.{framework}").Session


def _tf_threads_in_force() -> dict:
    """TensorFlow's thread pools are fixed once per process; asking for what is in force
    keeps sessions after the first test from warning.  The fresh-process test checks that
    a requested setting is really applied."""
    import tensorflow as tf

    threading = tf.config.threading
    return {
        "intra_op_threads": threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": threading.get_inter_op_parallelism_threads(),
    }


def _cfg(framework: str, **kw) -> TrainConfig:
    base = dict(model=MINI, framework=framework, batch_size=16, steps=15, warmup_steps=3, learning_rate=0.05)
    if framework == "pytorch":
        base.update(intra_op_threads=2, inter_op_threads=2)
    elif framework == "tensorflow":
        base.update(_tf_threads_in_force())
    elif framework == "mindspore":
        base.update(warmup_steps=2, seed=0)
    return TrainConfig(**{**base, **kw})


def _batches(framework: str, cfg: TrainConfig) -> list:
    spec = get_model(cfg.model)
    layout = _session_class(framework).layout
    return synthetic.image_batches(spec, cfg.batch_size, 2, seed=cfg.seed, layout=layout)


def _session(framework: str, **kw):
    """A session on two synthetic batches; the fresh-process test imports it by name."""
    cfg = _cfg(framework, **kw)
    return _session_class(framework)(get_model(cfg.model), cfg, _batches(framework, cfg))


@contextlib.contextmanager
def _pynative():
    """Single MindSpore forwards run op by op: compiling a graph for each would cost seconds."""
    import mindspore as ms

    mode = ms.get_context("mode")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    try:
        yield
    finally:
        ms.set_context(mode=mode)


def _logits(framework: str, net, x: np.ndarray) -> np.ndarray:
    """The network's inference-mode output for ``x`` (in the framework's layout)."""
    if framework == "pytorch":
        import torch

        net.eval()
        with torch.no_grad():
            return net(torch.from_numpy(x)).numpy()
    if framework == "tensorflow":
        return net(x, training=False).numpy()
    import mindspore as ms

    net.set_train(False)
    with _pynative():
        return net(ms.Tensor(x)).asnumpy()


def _weights(framework: str, net) -> list[np.ndarray]:
    """Every weight and statistic, the stem's convolution first."""
    if framework == "pytorch":
        return [t.numpy() for t in net.state_dict().values()]
    if framework == "tensorflow":
        return [w.numpy() for w in net.weights]
    return [p.asnumpy() for p in net.get_parameters()]


def _load_checkpoint(framework: str, net, path) -> None:
    """Load a saved checkpoint into a freshly built ``net``, failing on any missing name."""
    if framework == "pytorch":
        import torch

        net.load_state_dict(torch.load(path, weights_only=True))  # strict: every name
    elif framework == "tensorflow":
        net.load_weights(path)
    else:
        import mindspore as ms

        not_loaded, _ = ms.load_param_into_net(net, ms.load_checkpoint(str(path)))
        assert not not_loaded


def _can_use(framework: str, device: str) -> bool:
    if framework == "pytorch":
        import torch

        return device == "gpu" and torch.cuda.is_available()
    if framework == "tensorflow":
        import tensorflow as tf

        return device == "gpu" and bool(tf.config.list_physical_devices("GPU"))
    import mindspore as ms

    return getattr(ms.device_context, device).is_available()


@pytest.mark.parametrize("framework", frameworks())
def test_mini_counts_match_spec(framework):
    counting = importlib.import_module(f"dlbench.models.counting.{framework}")
    spec = get_model(MINI)
    net = spec.build(framework, seed=0)
    assert counting.trainable_parameters(net) == parameter_count(spec) == 376_722
    assert counting.forward_macs(net, spec) == multiply_adds(spec) == 6_269_440


@pytest.mark.parametrize("framework", frameworks())
def test_full_resnet50_counts_and_output_shape(framework):
    counting = importlib.import_module(f"dlbench.models.counting.{framework}")
    spec = get_model("resnet50")
    net = spec.build(framework, seed=0)
    assert counting.trainable_parameters(net) == parameter_count(spec) == 25_557_032
    assert counting.forward_macs(net, spec) == multiply_adds(spec) == 4_089_184_256
    x = np.zeros((1, 3, 224, 224), np.float32)
    if _session_class(framework).layout == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    assert _logits(framework, net, x).shape == (1, 1000)


# The names a checkpoint carries, in order: PyTorch's state dict (buffers included) and
# MindSpore's trainable parameters (BatchNorm's gamma and beta).  Keras names layers,
# checked with their shapes in test_keras_layers_match_walk.
NAMES = {
    "pytorch": (
        ["stem.conv.weight", "stem.bn.weight"],
        [
            "layer1.0.conv1.weight",
            "layer1.0.bn1.running_var",
            "layer1.0.downsample.conv.weight",
            "layer1.0.downsample.bn.bias",
            "layer4.2.conv3.weight",
        ],
    ),
    "mindspore": (
        ["stem.conv.weight", "stem.bn.gamma", "stem.bn.beta"],
        ["layer1.0.downsample.conv.weight", "layer4.2.bn3.gamma"],
    ),
}


@pytest.mark.parametrize("framework", frameworks("pytorch", "mindspore"))
def test_layer_names_follow_walk_order(framework):
    net = get_model(MINI).build(framework, seed=0)
    if framework == "pytorch":
        names = list(net.state_dict())
    else:
        names = [p.name for p in net.trainable_params()]
    first, inside = NAMES[framework]
    assert names[: len(first)] == first
    for name in inside:
        assert name in names
    assert names[-2:] == ["fc.weight", "fc.bias"]
    assert not any(n.startswith("layer1.1.downsample") for n in names)


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


@pytest.mark.tensorflow
def test_keras_layers_match_walk():
    import keras

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


@pytest.mark.parametrize("framework", frameworks())
def test_seed_makes_initial_weights_reproducible(framework):
    spec = get_model(MINI)
    a, b, c = (_weights(framework, spec.build(framework, seed=s)) for s in (3, 3, 4))
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run through the shared loop per framework and seed, trained once: the loss test
    and MindSpore's checkpoint test read the same run."""

    @functools.cache
    def run(framework: str, seed: int):
        out = tmp_path_factory.mktemp(f"{framework}-run")
        return loop.run(_cfg(framework, seed=seed), out), out

    return run


@pytest.mark.parametrize(
    "framework, seed",
    [
        pytest.param(*p.values, seed, marks=p.marks, id=f"{p.id}-{seed}")
        for p in frameworks()
        for seed in SEEDS[p.id]
    ],
)
def test_loss_falls_through_shared_loop(framework, seed, trained):
    result, out = trained(framework, seed)
    losses = result["losses"]
    cfg = _cfg(framework)
    assert len(losses) == cfg.steps + cfg.warmup_steps and all(math.isfinite(x) for x in losses)
    assert np.mean(losses[-3:]) < LOSS_RATIO[framework] * np.mean(losses[:3]), losses
    assert result["checkpoint"] == CHECKPOINT[framework] and (out / CHECKPOINT[framework]).is_file()
    rt = result["runtime"]
    if framework == "pytorch":
        assert rt["device"] == "cpu" and rt["intra_op_threads"] == 2
    elif framework == "tensorflow":
        assert rt["device"].endswith("CPU:0") and rt["data_device"].endswith("CPU:0")
        assert rt["dtype_policy"] == "float32"
    else:
        assert rt["device"] == "CPU" and rt["mode"] == "GRAPH_MODE"
        assert rt["intra_op_threads"] is not None and rt["inter_op_threads"] is not None
        assert result["framework_version"].startswith("2.8")


@pytest.mark.mindspore
def test_mindspore_checkpoint_is_complete(trained):
    import mindspore as ms

    _, out = trained("mindspore", 0)
    params = ms.load_checkpoint(str(out / "model.ckpt"))
    fresh = get_model(MINI).build("mindspore", seed=1)
    not_loaded, unused = ms.load_param_into_net(fresh, params)
    assert not not_loaded and not unused
    assert {"stem.bn.moving_mean", "fc.weight"} <= set(params)


@pytest.mark.parametrize("framework", frameworks())
def test_checkpoint_reloads_into_fresh_network(framework, tmp_path):
    # MindSpore: a smaller batch and one step (each step runs a compiled graph).
    steps, kw = (1, {"batch_size": 8}) if framework == "mindspore" else (3, {})
    session = _session(framework, seed=5, **kw)
    for i in range(steps):  # move weights and BN statistics off their init
        session.step(i)
    name = session.save(tmp_path)
    assert name == CHECKPOINT[framework] and name.endswith(session.checkpoint_suffix)
    x = _batches(framework, session.cfg)[0][0]
    expected = _logits(framework, session.model, x)
    fresh = get_model(MINI).build(framework, seed=99)
    assert not np.allclose(_logits(framework, fresh, x), expected)
    _load_checkpoint(framework, fresh, tmp_path / name)
    np.testing.assert_array_equal(_logits(framework, fresh, x), expected)
    if framework == "tensorflow":
        import keras

        # The .keras file also loads whole, without dlbench's builder.
        loaded = keras.models.load_model(tmp_path / name)
        np.testing.assert_array_equal(loaded(x, training=False).numpy(), expected)


# What amp means on a CPU, as each session reports it: bfloat16 autocast in PyTorch, Keras'
# mixed_bfloat16 policy, float16 in MindSpore.
AMP = {
    "pytorch": ("autocast_dtype", "bfloat16"),
    "tensorflow": ("dtype_policy", "mixed_bfloat16"),
    "mindspore": ("amp_dtype", "Float16"),
}


@pytest.mark.parametrize("framework", frameworks())
def test_cpu_amp_trains_in_half_precision(framework, tmp_path):
    session = _session(framework, precision="amp")
    losses = [session.step(i) for i in range(3 if framework == "mindspore" else 1)]
    assert all(math.isfinite(v) for v in losses)
    key, dtype = AMP[framework]
    assert session.runtime()[key] == dtype
    if framework == "tensorflow":
        import keras
        import tensorflow as tf

        assert session.model.get_layer("stem.conv").compute_dtype == "bfloat16"
        assert session.model(session.batches[0][0][0], training=False).dtype == tf.float32
        assert keras.mixed_precision.global_policy().name == "float32"  # restored
    elif framework == "mindspore":
        import mindspore as ms

        # The checkpoint holds the network's own names in float32, not the cast copies.
        session.save(tmp_path)
        params = ms.load_checkpoint(str(tmp_path / "model.ckpt"))
        not_loaded, unused = ms.load_param_into_net(get_model(MINI).build("mindspore", seed=1), params)
        assert not not_loaded and not unused
        assert {str(p.dtype) for p in params.values()} == {"Float32"}


# Refused before a batch is read: no batches given.  The ids avoid the bare words "gpu" and
# "ascend", the hardware markers' names.
@pytest.mark.parametrize("device", ["gpu", "ascend"], ids=["to-gpu", "to-ascend"])
@pytest.mark.parametrize("framework", frameworks())
def test_unusable_device_is_a_user_error(framework, device):
    if _can_use(framework, device):
        pytest.skip(f"this {framework} can use {device}")
    reason = {
        ("pytorch", "gpu"): "no CUDA device",
        ("tensorflow", "gpu"): "sees no GPU",
    }.get((framework, device), f"--device {device}")
    with pytest.raises(UserError, match=reason):
        _session_class(framework)(get_model(MINI), _cfg(framework, device=device), [])


@pytest.mark.parametrize("framework", frameworks("tensorflow", "mindspore"))
def test_unknown_precision_is_a_user_error(framework):
    with pytest.raises(UserError, match="--precision int8"):
        _session_class(framework)(get_model(MINI), _cfg(framework, precision="int8"), [])


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "amp"])
@pytest.mark.parametrize("framework", frameworks("pytorch", "tensorflow"))
def test_gpu_session_trains_on_gpu(framework, precision, tmp_path):
    if not _can_use(framework, "gpu"):
        pytest.skip(f"{framework} sees no GPU")
    result = loop.run(_cfg(framework, device="gpu", precision=precision), tmp_path)
    rt = result["runtime"]
    if framework == "pytorch":
        assert rt["device"].startswith("cuda")
    else:
        assert rt["device"].endswith("GPU:0") and rt["data_device"].endswith("GPU:0")
        assert rt["loss_scaling"] == (precision == "amp")
    losses = result["losses"]
    assert np.mean(losses[-3:]) < LOSS_RATIO[framework] * np.mean(losses[:3])


@pytest.mark.mindspore
@pytest.mark.gpu
def test_mindspore_gpu_session_trains(tmp_path):
    # Its own process: MindSpore's device is fixed once per process, and the tests
    # above have already put this one on the CPU.
    if not _can_use("mindspore", "gpu"):
        pytest.skip("MindSpore sees no usable GPU")
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


@pytest.mark.parametrize("framework", frameworks("pytorch", "tensorflow"))
def test_threads_are_applied_in_a_fresh_process(framework):
    # The pools are fixed once per process, so only a new process shows that a
    # requested value is really put in force (the CLI runs each cell so).
    code = (
        "import json; from tests.harness.training.test_training import _session; "
        f"print(json.dumps(_session({framework!r}, intra_op_threads=1, inter_op_threads=2).runtime()))"
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
    assert (rt["intra_op_threads"], rt["inter_op_threads"]) == (1, 2)
    if framework == "tensorflow":
        assert rt["threads_applied"]


@pytest.mark.tensorflow
def test_tensorflow_threads_in_force_are_reported_when_they_cannot_change():
    import tensorflow as tf

    tf.constant(1.0) + 1  # make sure the runtime has started
    in_force = _cfg("tensorflow").intra_op_threads
    with pytest.warns(RuntimeWarning, match="already initialized"):
        session = _session("tensorflow", intra_op_threads=in_force + 1)
    rt = session.runtime()
    assert not rt["threads_applied"] and rt["intra_op_threads"] == in_force


@pytest.mark.parametrize("framework", frameworks("pytorch", "tensorflow"))
def test_plain_reference_loop_prints_one_json_line(framework):
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / f"plain_train_{framework}.py"),
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
