"""MindSpore training session: one compiled (GRAPH_MODE) SGD step per call.

``nn.WithLossCell`` + ``nn.TrainOneStepCell`` under GRAPH_MODE compiles the
forward, backward and optimizer update into one graph.  Measured on
resnet50-mini (batch 16, 2 cores) it ran a step in ~0.045 s, while the
functional ``value_and_grad`` + ``@jit`` form took ~0.3 s (PyNative or GRAPH_MODE).
That is why this session uses the Cell form.

float32 is IEEE float32: on Ascend, CANN keeps the graph's own types with HF32
off (``harness.cells.mathmode``, read back into the record).  Batches are placed on
a non-CPU device ahead of the step, the way the inference backend places its
inputs (``Tensor.move_to`` in PyNative mode, as MindSpore documents it), and
the runtime reports where the data tensors actually live.
"""

from __future__ import annotations

import os

# MindSpore logs at INFO/WARNING to stderr by default; GLOG_v is read at import.
os.environ.setdefault("GLOG_v", "3")

from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import nn, ops

from dlbench.core.errors import UserError, first_line
from dlbench.harness.backends.mindspore import place as place_on
from dlbench.harness.backends.mindspore import tensor_device
from dlbench.harness.cells import mathmode
from dlbench.harness.training.base import TrainConfig, TrainSession
from dlbench.harness.training.objectives import inputs_of, label_dtype, labels_of, loss_for
from dlbench.models.registry import ModelSpec

_TARGETS = {"cpu": "CPU", "gpu": "GPU", "ascend": "Ascend"}
# MindSpore 2.8's CPU kernels have no bfloat16 Conv2D/MaxPool (amp with bfloat16
# fails to compile), so amp is float16 at level "auto" (autocast-like: only
# whitelisted ops in fp16).  It works on CPU but is slower than fp32 there (about
# 2.3x per ResNet-50 step, 3x on resnet50-mini): that is the result to report,
# not a reason to refuse.  A fixed loss scale keeps fp16 gradients from
# underflowing; the dynamic TrainOneStepWithLossScaleCell reads Ascend-only
# overflow flags (NPUGetFloatStatusV2) on CPU in 2.8 and fails to compile.
AMP_DTYPE = ms.float16
AMP_LEVEL = "auto"
LOSS_SCALE = 1024.0

# The thread counts this process runs with: MindSpore sizes its pools once.
_threads_in_force: tuple[int | None, int | None] | None = None


def select_device(device: str) -> str:
    """Make ``device`` the process's MindSpore target, or raise UserError.

    Availability is checked first so that a CPU-only build fails with a clear
    reason instead of MindSpore's multi-paragraph plugin-loading error.
    """
    if device not in _TARGETS:
        raise UserError(f"--device {device}: unknown device (choose cpu, gpu or ascend)")
    target = _TARGETS[device]
    if device != "cpu" and not getattr(ms.device_context, device).is_available():
        raise UserError(
            f"--device {device}: this MindSpore {ms.__version__} installation cannot "
            f"use {target} (mindspore.device_context.{device}.is_available() is False)"
        )
    try:
        ms.set_device(target)
    except RuntimeError as exc:
        # set_device refuses once the runtime has started (a second session in
        # one process); that is fine only if it already runs on the same target.
        current = ms.get_current_device().device_target
        if current != target:
            raise UserError(
                f"--device {device}: this process already runs MindSpore on {current} ({first_line(exc)})"
            ) from None
    return target


def apply_threads(intra: int, inter: int) -> tuple[int | None, int | None]:
    """Size MindSpore's CPU kernel pool (intra-op) and runtime dispatch pool (inter-op).

    These are 2.8's non-deprecated replacements for set_context(runtime_num_threads,
    inter_op_parallel_num).  Each may be set only once per process and has no
    getter, so the first counts are remembered here: a second session in the
    same process (tests, sweeps) keeps them and ``runtime()`` reports those,
    as the PyTorch session does for its inter-op pool.  None means someone
    else set the pool first and the count is unknown.
    """
    global _threads_in_force
    if _threads_in_force is None:
        applied = []
        for setter, value in (
            (ms.device_context.cpu.op_tuning.threads_num, intra),
            (ms.runtime.dispatch_threads_num, inter),
        ):
            try:
                setter(value)
                applied.append(value)
            except RuntimeError:  # "can not be set repeatedly"
                applied.append(None)
        _threads_in_force = (applied[0], applied[1])
    return _threads_in_force


class _LogitsToFloat(nn.Cell):
    """Computes the loss in float32 whatever precision the network's layers ran in.

    ``auto_prefix=False`` keeps the wrapped parameters' names (no ``net.``
    prefix), so an amp checkpoint loads into a plain network like an fp32 one.
    """

    def __init__(self, net: nn.Cell):
        super().__init__(auto_prefix=False)
        self.net = net

    def construct(self, *x):
        out = self.net(*x)
        if isinstance(out, tuple):
            return out  # several outputs (pre-training heads): the loss casts
        return ops.cast(out, ms.float32)


class ClassificationLoss(nn.Cell):
    """Mean sparse softmax cross-entropy on the logits, classes on the last axis."""

    def __init__(self):
        super().__init__()
        self.ce = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")

    def construct(self, logits, labels):
        return self.ce(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


class RegressionLoss(nn.Cell):
    """Mean squared error, in float32."""

    def __init__(self):
        super().__init__()
        self.mse = nn.MSELoss()

    def construct(self, outputs, targets):
        return self.mse(ops.cast(outputs, ms.float32), targets)


class _WithLoss(nn.Cell):
    """The network and its objective over flat arguments: ``(*inputs, *labels)``.

    ``nn.WithLossCell`` takes exactly one input and one label; token models
    have several of either.  ``auto_prefix=False`` keeps parameter names.
    """

    def __init__(self, net: nn.Cell, loss: nn.Cell, n_inputs: int):
        super().__init__(auto_prefix=False)
        self.net, self.loss, self.n_inputs = net, loss, n_inputs

    def construct(self, *args):
        return self.loss(self.net(*args[: self.n_inputs]), *args[self.n_inputs :])


class _Sum(nn.Cell):
    def __init__(self):
        super().__init__()
        self.all_reduce = ops.AllReduce()

    def construct(self, x):
        return self.all_reduce(x)


class Session(TrainSession):
    framework = "mindspore"
    layout = "NCHW"
    checkpoint_suffix = ".ckpt"
    checkpoint_name = "model.ckpt"

    def __init__(self, spec: ModelSpec, cfg: TrainConfig, batches: list[tuple[np.ndarray, np.ndarray]]):
        super().__init__(spec, cfg, batches)
        if cfg.precision not in ("fp32", "amp", "tf32"):
            raise UserError(f"--precision {cfg.precision}: MindSpore supports fp32 and amp")
        self.target = select_device(cfg.device)
        self.math = mathmode.mindspore_math(ms, self.target, cfg.precision)  # refuses tf32
        self.threads = apply_threads(cfg.intra_op_threads, cfg.inter_op_threads)
        ms.set_context(mode=ms.PYNATIVE_MODE if cfg.eager else ms.GRAPH_MODE)
        if cfg.distributed:
            self._join_cluster()
        ms.set_seed(cfg.seed)

        self.model = spec.build_for_training("mindspore")
        amp = cfg.precision == "amp"
        net = self.model
        if amp:
            net = _LogitsToFloat(ms.amp.auto_mixed_precision(net, AMP_LEVEL, dtype=AMP_DTYPE))
        scale = LOSS_SCALE if amp else 1.0
        loss_fn = loss_for(spec.objective, self.framework)()
        # The optimizer divides gradients by loss_scale; TrainOneStepCell's sens multiplies.
        optimizer = nn.Momentum(
            self.model.trainable_params(),
            learning_rate=cfg.learning_rate,
            momentum=cfg.momentum,
            loss_scale=scale,
        )
        self.train_step = nn.TrainOneStepCell(
            _WithLoss(net, loss_fn, len(spec.inputs)), optimizer, sens=LOSS_SCALE if amp else None
        )
        self.train_step.set_train()
        self.batches = [self.place(b) for b in batches]

    def _join_cluster(self) -> None:
        """Join msrun's dynamic cluster; in DATA_PARALLEL mode TrainOneStepCell builds its
        own gradient reducer (a mean over ranks) into the compiled step."""
        from mindspore.communication import get_group_size, get_rank, init

        init()
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
        self.rank, self.world_size = get_rank(), get_group_size()

    def all_gather(self, row: np.ndarray) -> np.ndarray:
        """Each rank fills its own row of a zero table and the ranks sum the tables: an
        all-gather made of the AllReduce every data-parallel step already compiles (the
        CPU build registers no AllGather kernel in 2.8)."""
        if not self.cfg.distributed:
            return super().all_gather(row)
        table = np.zeros((self.world_size, len(row)), np.float64)
        table[self.rank] = row
        return _Sum()(ms.Tensor(table)).asnumpy()

    def weights_sum(self) -> float:
        return float(sum(np.abs(p.asnumpy()).astype(np.float64).sum() for p in self.model.trainable_params()))

    @staticmethod
    def version() -> str:
        return ms.__version__

    def step(self, index: int) -> float:
        x, y = self.batches[index % len(self.batches)]
        return float(self.train_step(*x, *y).asnumpy())  # asnumpy waits for the step

    def place(self, batch):
        """(tuple of input tensors, tuple of label tensors: int32 classes, float targets)."""
        x, y = batch
        y = labels_of(self.spec, y)
        labels = y if isinstance(y, tuple) else (y,)
        inputs = [ms.Tensor(a) for a in inputs_of(self.spec, x)]
        dtype = label_dtype(self.spec.objective, "int32")
        targets = [ms.Tensor(np.asarray(a, dtype)) for a in labels]
        if self.target != "CPU":
            inputs, targets = (place_on(ms, inputs, self.target), place_on(ms, targets, self.target))
        return tuple(inputs), tuple(targets)

    def eval_outputs(self, batches):
        # Outputs come back to the host in float32 and are scored there in float64.
        net = _LogitsToFloat(self.model)
        net.set_train(False)
        try:
            for x, y in batches:
                out = net(*[ms.Tensor(a) for a in inputs_of(self.spec, x)])
                out = out if isinstance(out, (tuple, list)) else (out,)
                yield tuple(o.asnumpy() for o in out), y
        finally:
            self.model.set_train(True)

    def save(self, directory: Path) -> str:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        # The bare network: weights and BN statistics, not the optimizer's moments.
        ms.save_checkpoint(self.model, str(directory / self.checkpoint_name))
        return self.checkpoint_name

    def runtime(self) -> dict[str, Any]:
        amp = self.cfg.precision == "amp"
        return {
            "device": ms.get_current_device().device_target,
            "mode": "GRAPH_MODE" if ms.get_context("mode") == ms.GRAPH_MODE else "PYNATIVE_MODE",
            "intra_op_threads": self.threads[0],  # device_context.cpu.op_tuning.threads_num
            "inter_op_threads": self.threads[1],  # runtime.dispatch_threads_num
            "precision": self.cfg.precision,
            "amp_dtype": str(AMP_DTYPE) if amp else None,
            "amp_level": AMP_LEVEL if amp else None,
            "loss_scale": LOSS_SCALE if amp else None,
            "data_device": tensor_device(self.batches[0][0][0]),
            "math_mode": self.math,
            **(
                {
                    "launcher": "msrun",
                    "data_parallel": "DATA_PARALLEL (gradients_mean)",
                    "world_size": self.world_size,
                }
                if self.cfg.distributed
                else {}
            ),
        }
