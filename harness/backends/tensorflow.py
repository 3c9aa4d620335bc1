"""TensorFlow itself as an inference backend: the Keras network in a ``tf.function``.

The network is channels-last (TensorFlow's CPU convolutions want NHWC), so
inputs are transposed while preparing and copied to the device with
``tf.identity`` under the device scope, outside the timed region.  On a GPU
``sync`` is ``tf.test.experimental.sync_devices``; on the CPU the call
returns when the outputs exist.  bf16/fp16 use Keras mixed-precision
policies (weights stay fp32, compute in the lower type); float32 is IEEE
float32 (TensorFlow's TF32 switch, on by default on Ampere, turned off and
read back by ``harness.cells.mathmode``), and ``tf32`` runs it in TensorFloat-32.

Soft device placement is off: an op with no kernel on the device asked for
fails the cell instead of quietly running on the CPU, and the record says so.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.backends.base import (
    ON_OFF,
    ArtifactRef,
    FellBack,
    Option,
    RunConfig,
    Runner,
    region,
    with_tf32,
)
from dlbench.harness.backends.native import NativeFramework, NativeRunner, native_formats
from dlbench.harness.cells import mathmode

POLICIES = {"fp32": "float32", "tf32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


class TfRunner(NativeRunner):
    framework = "tensorflow"

    def load(self) -> None:
        if "tensorflow" not in sys.modules:
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import keras
        import tensorflow as tf

        self.tf, self.keras = tf, keras
        threading = tf.config.threading
        if threading.get_intra_op_parallelism_threads() != self.cfg.intra_op_threads:
            threading.set_intra_op_parallelism_threads(self.cfg.intra_op_threads)
        if threading.get_inter_op_parallelism_threads() != self.cfg.inter_op_threads:
            threading.set_inter_op_parallelism_threads(self.cfg.inter_op_threads)
        if self.cfg.device == "cuda":
            gpus = tf.config.list_physical_devices("GPU")
            if not gpus:
                raise UserError(
                    "--device cuda: TensorFlow sees no GPU "
                    f"({'built with CUDA' if tf.test.is_built_with_cuda() else 'a CPU-only build'})"
                )
            self.tf_device = f"/GPU:{self.cfg.device_id}"
        else:
            self.tf_device = "/CPU:0"
        if self.cfg.precision == "fp16" and self.cfg.device != "cuda":
            raise UserError("--precision fp16: TensorFlow runs fp16 on a GPU only (use bf16 on the CPU)")
        tf.config.set_soft_device_placement(False)
        self.math = mathmode.tensorflow_math(tf, self.cfg.device, self.cfg.precision)
        policy = POLICIES[self.cfg.precision]
        previous = keras.mixed_precision.global_policy()
        keras.mixed_precision.set_global_policy(policy)
        try:
            with tf.device(self.tf_device):
                if self.user:
                    self.model = self.load_user()
                elif self.artifact.checkpoint:
                    from dlbench.models.native import tensorflow as native

                    self.model = native.load(self.spec, self.artifact.checkpoint)
                else:
                    self.model = self.spec.build("tensorflow", seed=self.cfg.seed)
        finally:
            keras.mixed_precision.set_global_policy(previous)
        self.policy = policy
        if self.user and policy != "float32":
            self._check_user_policy(policy)
        device = self.tf_device
        if self.user:
            from dlbench.harness.usermodel import source_of
            from dlbench.models.user.tensorflow import caller

            call = caller(self.model, source_of(self.artifact), [t.name for t in self.inputs()])
        else:
            model = self.model

            def call(*xs):
                return model(xs[0] if len(xs) == 1 else list(xs), training=False)

        def forward(*xs):
            with tf.device(device):
                return call(*xs)

        self.xla = self.cfg.options["xla"] == "on"
        # cpu-mkl's runner is this one and declares no eager; --eager with --xla never gets
        # here (TensorFlow.conflict refuses it before any cell starts).
        self.eager = self.cfg.options.get("eager") == "on"
        self.fn = forward if self.eager else tf.function(forward, jit_compile=self.xla)

    def network(self) -> Any:
        # Loaded under the float32 policy, a zoo checkpoint is native.load's model itself and
        # a user's file is usermodel.load's: what the export cell would load again.
        plain = (self.user or self.artifact.checkpoint) and self.policy == "float32"
        return self.model if plain else None

    def prepare(self, feeds: dict[str, Any]) -> Any:
        from dlbench.models.native.tensorflow import nhwc

        # A zoo network is channels-last inside; a user's model takes what it declares.
        layout = (lambda x: x) if self.user else nhwc
        with self.tf.device(self.tf_device):
            return [self.tf.identity(self.tf.constant(layout(x))) for x in feeds.values()]

    def run(self, x: Any) -> None:
        self._out = self.fn(*x)

    def sync(self) -> None:
        if self.cfg.device == "cuda":
            self.tf.test.experimental.sync_devices()

    def outputs(self) -> dict[str, Any]:
        if self.user:
            from dlbench.models.user.tensorflow import to_numpy

            return to_numpy(self._out, self.artifact.meta.get("outputs"))
        return {"logits": self._out.numpy()}

    def timed_region(self) -> dict[str, Any]:
        sync = (
            "tf.test.experimental.sync_devices"
            if self.cfg.device == "cuda"
            else "none needed: the CPU call returns when the outputs exist"
        )
        return region(
            (
                "model(x, training=False) called eagerly, op by op"
                if self.eager
                else f"a tf.function around model(x, training=False){' with XLA' if self.xla else ''}"
            )
            + f", {self.layout} input already on {self.tf_device}; {sync}",
            host_device_copies=False,
            io_binding=False,
            cuda_graph=False,
            sync=sync,
            layout=self.layout,
        )

    def _check_user_policy(self, policy: str) -> None:
        """A saved model keeps the dtype policies it was saved with (and a SavedModel has
        none to change): one that would not compute in ``policy`` is refused, not measured
        as if it did."""
        from dlbench.harness.backends.base import FellBack

        layers = getattr(self.model, "layers", None)
        if layers is None:
            raise FellBack(
                f"--precision {self.cfg.precision}: a SavedModel runs in the dtypes it was saved with"
            )
        kept = sorted(
            {
                str(getattr(layer.dtype_policy, "name", layer.dtype_policy))
                for layer in layers
                if getattr(layer, "weights", None)
            }
            - {policy}
        )
        if kept:
            raise FellBack(
                f"--precision {self.cfg.precision}: the saved model's layers keep "
                f"their own dtype policy ({', '.join(kept)}), not {policy}"
            )

    @property
    def layout(self) -> str:
        return "the model's own layout" if self.user else "NHWC"

    def runtime(self) -> dict[str, Any]:
        from tensorflow.python.util import _pywrap_util_port

        tf = self.tf
        out = getattr(self, "_out", None)
        if self.user and out is not None:
            from dlbench.models.user.tensorflow import flatten

            out = next(iter(flatten(out).values()), None)
        out_device = out.device if out is not None else ""
        kind = "cuda" if "GPU" in out_device else ("cpu" if "CPU" in out_device else "")
        threading = tf.config.threading
        return {
            "device_kind": kind,
            "output_device": out_device,
            "tensorflow": tf.__version__,
            "keras": self.keras.__version__,
            "dtype_policy": self.policy,
            "xla": self.xla,
            "execution": "eager" if self.eager else "tf.function",
            "onednn_enabled": bool(_pywrap_util_port.IsMklEnabled()),
            "intra_op_threads": threading.get_intra_op_parallelism_threads(),
            "inter_op_threads": threading.get_inter_op_parallelism_threads(),
            "layout": self.layout,
            "math_mode": self.math,
            "soft_device_placement": bool(tf.config.get_soft_device_placement()),
            **self.describe(),
        }

    def verify(self, runtime: dict[str, Any]) -> None:
        super().verify(runtime)
        if runtime["soft_device_placement"]:
            raise FellBack(
                "TensorFlow's soft device placement is on: ops without a "
                f"{self.cfg.device} kernel may have run on the CPU"
            )


class TensorFlow(NativeFramework):
    framework = "tensorflow"
    formats = native_formats("tensorflow")
    inter_op_pool = True
    options = (
        Option("xla", "off", ON_OFF, help="compile the tf.function with XLA", tune_on=("cpu", "cuda")),
        Option(
            "eager",
            "off",
            ON_OFF,
            help="call model(x) eagerly, op by op, in no tf.function (verification's reference runs so)",
            switch=True,
        ),
    )

    def verify_options(self, artifact: ArtifactRef) -> dict[str, Any]:
        return {"eager": "on"}

    def conflict(self, options: dict[str, Any]) -> str | None:
        if options["eager"] == "on" and options["xla"] == "on":
            return "--eager with --xla: XLA compiles a tf.function, and an eager call makes none"
        return None

    def precisions(self, device):
        return with_tf32(("fp32", "fp16", "bf16"), device) if device == "cuda" else ("fp32", "bf16")

    def runner(self, artifact: ArtifactRef, cfg: RunConfig) -> Runner:
        return TfRunner(artifact, cfg)


BACKEND = TensorFlow(
    "tensorflow",
    "TensorFlow native inference (tf.function, CPU or GPU)",
    "tensorflow",
    "tensorflow",
    "tensorflow",
)
