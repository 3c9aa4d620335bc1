"""TensorFlow 2 / Keras 3 training session.

The step is a custom loop (GradientTape + ``optimizer.apply``) inside one
``tf.function``: that is the idiomatic Keras 3 loop for TensorFlow, and unlike
``model.train_on_batch`` it reads no metrics and converts no numpy per step,
so the harness times the framework's graph and not Keras' bookkeeping.  XLA
stays off (TensorFlow's own default on CPU-only machines, where oneDNN kernels
beat XLA's convolutions).

float32 is IEEE float32 (TensorFlow's TF32 switch, on by default on Ampere, is
turned off and read back by ``harness.cells.mathmode``; ``tf32`` turns it on), and
soft device placement is off, so an op with no kernel on the GPU fails the run
instead of quietly training on the CPU.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

# TensorFlow reads its C++ log level once, at import: only worth setting if it
# is not imported yet, and a user's own setting wins.  oneDNN stays as shipped.
if "tensorflow" not in sys.modules:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import tensorflow as tf

from dlbench.core.errors import UserError
from dlbench.harness.cells import mathmode
from dlbench.harness.training.base import TrainConfig, TrainSession
from dlbench.harness.training.objectives import inputs_of, labels_of, loss_for
from dlbench.models.registry import ModelSpec

CHECKPOINT = "model.keras"


def _apply_threads(intra: int, inter: int) -> bool:
    """Set TF's thread pools; False if the runtime already runs with others.

    TensorFlow fixes its pools when its runtime starts (the first op or
    device query that creates the eager context), so this must come before
    anything else touches TensorFlow.  A harness run gets a fresh process and
    always succeeds; a process that already ran TensorFlow (a test session)
    keeps its pools, and ``runtime()`` reports those rather than the request.
    """
    threading = tf.config.threading
    try:
        # Compare first: TF refuses even a same-value set once it has started.
        if threading.get_intra_op_parallelism_threads() != intra:
            threading.set_intra_op_parallelism_threads(intra)
        if threading.get_inter_op_parallelism_threads() != inter:
            threading.set_inter_op_parallelism_threads(inter)
        return True
    except RuntimeError:
        warnings.warn(
            f"TensorFlow's runtime was already initialized with intra_op="
            f"{threading.get_intra_op_parallelism_threads()}, inter_op="
            f"{threading.get_inter_op_parallelism_threads()}; cannot apply "
            f"intra_op={intra}, inter_op={inter} in this process",
            RuntimeWarning,
            stacklevel=3,
        )
        return False


def _device(device: str) -> str:
    if device == "cpu":
        return "/CPU:0"
    if device == "gpu":
        if not tf.config.list_physical_devices("GPU"):
            built = "built with CUDA" if tf.test.is_built_with_cuda() else "a CPU-only build"
            raise UserError(f"--device gpu: TensorFlow ({built}) sees no GPU")
        return "/GPU:0"
    if device == "ascend":
        raise UserError("--device ascend: TensorFlow has no Ascend NPU support (use --framework mindspore)")
    raise UserError(f"--device {device}: unknown device (choose cpu, gpu or ascend)")


def _dtype_policy(precision: str, device: str) -> str:
    """bf16 on CPU (oneDNN has bf16 kernels, no loss scaling needed), fp16 on GPU."""
    if precision in ("fp32", "tf32"):  # tf32: float32 variables and math mode
        return "float32"
    if precision == "amp":
        return "mixed_float16" if device == "gpu" else "mixed_bfloat16"
    raise UserError(f"--precision {precision}: unknown precision (choose fp32, tf32 or amp)")


def classification_loss(logits, labels):
    """Mean sparse cross-entropy, in float32 whatever the compute dtype (classes on the
    last axis: Keras' sparse cross-entropy takes any leading dimensions)."""
    return tf.reduce_mean(
        keras.losses.sparse_categorical_crossentropy(labels, tf.cast(logits, tf.float32), from_logits=True)
    )


def regression_loss(outputs, targets):
    return tf.reduce_mean(tf.square(tf.cast(outputs, tf.float32) - targets))


def model_inputs(x: tuple):
    """What a Keras functional model is called with: the tensor, or a list for several."""
    return x[0] if len(x) == 1 else list(x)


def _worker_strategy(device: str):
    """This worker's MultiWorkerMirroredStrategy (the cluster from TF_CONFIG): ring
    all-reduce over gRPC on a CPU, NCCL on GPUs."""
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.NCCL
        if device == "gpu"
        else tf.distribute.experimental.CommunicationImplementation.RING
    )
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


class Session(TrainSession):
    framework = "tensorflow"
    layout = "NHWC"
    checkpoint_suffix = ".keras"

    def __init__(self, spec: ModelSpec, cfg: TrainConfig, batches: list[tuple[Any, Any]]):
        super().__init__(spec, cfg, batches)
        self._threads_applied = _apply_threads(cfg.intra_op_threads, cfg.inter_op_threads)
        self._device = _device(cfg.device)
        # MultiWorkerMirroredStrategy must exist before other TensorFlow work starts.
        self.strategy = _worker_strategy(cfg.device) if cfg.distributed else None
        if self.strategy is not None:
            self.rank = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
            self.world_size = self.strategy.num_replicas_in_sync
        self._policy = _dtype_policy(cfg.precision, cfg.device)
        tf.config.set_soft_device_placement(False)
        self.math = mathmode.tensorflow_math(tf, cfg.device, cfg.precision)
        keras.utils.set_random_seed(cfg.seed)
        with self._scope():
            self.model = self._build(spec)
            optimizer = keras.optimizers.SGD(learning_rate=cfg.learning_rate, momentum=cfg.momentum)
            if self._policy == "mixed_float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            optimizer.build(self.model.trainable_variables)
            self.optimizer = optimizer
            self.batches = [self.place(b) for b in batches]
        self._loss = loss_for(spec.objective, self.framework)
        step = self._step_graph
        if self.strategy is not None:

            def step(inputs, labels):
                return self.strategy.run(self._step_graph, args=(inputs, labels))

        self._train_step = step if cfg.eager else tf.function(step, jit_compile=False)

    def _scope(self):
        """Where variables are made: the strategy's scope (mirrored, all-reduced by the
        optimizer) in a data-parallel cell, else the device."""
        return self.strategy.scope() if self.strategy is not None else tf.device(self._device)

    def _placed(self):
        # Under the strategy each worker runs its one replica on its own device.
        return contextlib.nullcontext() if self.strategy is not None else tf.device(self._device)

    def _build(self, spec: ModelSpec) -> keras.Model:
        # Keras picks the compute dtype from the global policy at layer
        # creation; restore it after so the process-wide default is untouched.
        previous = keras.mixed_precision.global_policy()
        keras.mixed_precision.set_global_policy(self._policy)
        try:
            return spec.build_for_training(self.framework)
        finally:
            keras.mixed_precision.set_global_policy(previous)

    def _step_graph(self, inputs, labels):
        with self._placed():
            with tf.GradientTape() as tape:
                outputs = self.model(model_inputs(inputs), training=True)
                loss = self._loss(outputs, labels)
                # identity unless fp16; the strategy sums replicas' gradients: mean them
                scaled = self.optimizer.scale_loss(loss) / self.world_size
            grads = tape.gradient(scaled, self.model.trainable_variables)
            self.optimizer.apply(grads, self.model.trainable_variables)
        return loss

    def all_gather(self, row):
        if self.strategy is None:
            return super().all_gather(row)
        mine = tf.constant(row, tf.float64)[None]
        values = self.strategy.experimental_distribute_values_from_function(lambda _: mine)
        return self.strategy.gather(values, axis=0).numpy()

    def weights_sum(self) -> float:
        return float(sum(np.abs(v.numpy()).astype(np.float64).sum() for v in self.model.trainable_variables))

    @staticmethod
    def version() -> str:
        return tf.__version__

    def step(self, index: int) -> float:
        inputs, labels = self.batches[index % len(self.batches)]
        return float(self._train_step(inputs, labels))

    def place(self, batch):
        """(tuple of input tensors, labels) on the device: tf.identity under the device
        scope copies the host arrays once, here, instead of on every step."""
        x, y = batch
        y = labels_of(self.spec, y)
        with tf.device(self._device):
            inputs = tuple(tf.identity(tf.constant(a)) for a in inputs_of(self.spec, x))
            labels = (
                tuple(tf.identity(tf.constant(a)) for a in y)
                if isinstance(y, tuple)
                else tf.identity(tf.constant(y))
            )
        return inputs, labels

    def _eval_graph(self, *inputs):
        with tf.device(self._device):
            out = self.model(model_inputs(inputs), training=False)
        out = out if isinstance(out, (tuple, list)) else (out,)
        return tuple(tf.cast(o, tf.float32) for o in out)

    def eval_outputs(self, batches):
        # reduce_retracing: the last, shorter batch reuses a shape-generic graph.
        graph = (
            self._eval_graph
            if self.cfg.eager
            else tf.function(self._eval_graph, jit_compile=False, reduce_retracing=True)
        )
        for batch in batches:
            inputs, _ = self.place(batch)
            yield tuple(o.numpy() for o in graph(*inputs)), batch[1]

    def save(self, directory: Path) -> str:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save(directory / CHECKPOINT)
        return CHECKPOINT

    def runtime(self) -> dict[str, Any]:
        threading = tf.config.threading
        info = {
            "device": self.model.trainable_variables[0].value.device,
            "data_device": self.batches[0][0][0].device,
            # 0 means TensorFlow chose the pool size (one thread per core).
            "intra_op_threads": threading.get_intra_op_parallelism_threads(),
            "inter_op_threads": threading.get_inter_op_parallelism_threads(),
            "threads_applied": self._threads_applied,
            "precision": self.cfg.precision,
            "dtype_policy": self._policy,
            "loss_scaling": isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer),
            "xla": False,
            "execution": "eager" if self.cfg.eager else "tf.function",
            "keras_version": keras.__version__,
            "math_mode": self.math,
            "soft_device_placement": bool(tf.config.get_soft_device_placement()),
        }
        if self.strategy is not None:
            info.update(
                launcher="TF_CONFIG workers",
                data_parallel="MultiWorkerMirroredStrategy",
                world_size=self.world_size,
                collective="NCCL" if self.cfg.device == "gpu" else "RING",
            )
        if self._device.startswith("/GPU"):
            gpu = tf.config.list_physical_devices("GPU")[0]
            info["gpu_name"] = tf.config.experimental.get_device_details(gpu).get("device_name")
        return info
