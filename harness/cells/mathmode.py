"""What "fp32" means in a cell: IEEE float32, set through each framework's own switch and read back.

Why this exists: on NVIDIA Ampere and newer, PyTorch's cuDNN convolutions,
TensorFlow, ONNX Runtime's CUDA provider and TensorRT's builder round the
inputs of float32 matmuls and convolutions to TensorFloat-32 (a 10-bit
mantissa) unless told not to; CANN on an Ascend NPU may run float32 as
float16 or HF32; oneDNN on the CPU computes float32 in bf16 when an
environment variable (or PyTorch's switch) allows it.  A number labelled
fp32 that was computed in TF32 is a different measurement, so:

* ``fp32`` sets every switch to IEEE float32 (so does every other precision,
  for whatever stays float32 inside an fp16, bf16 or int8 model);
* ``tf32`` is a precision of its own, offered only on an NVIDIA GPU of
  compute capability 8.0 or newer, and refused elsewhere with the reason;
* each framework's helper returns what its switches *read back* after being
  set, which every record stores as ``math_mode``; a read-back that is not
  what was asked fails the run instead of being reported under its label;
* environment variables that override the switches (``NVIDIA_TF32_OVERRIDE``,
  oneDNN's fpmath modes) are part of the math mode, and one that contradicts
  the precision asked refuses the run.

No framework is imported here: helpers take the module their caller loaded.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from dlbench.core.devices import is_nvidia
from dlbench.core.errors import UserError

TF32 = "tf32"
TF32_MIN_CC = (8, 0)
# Variables read by the libraries themselves, beneath every framework switch.
TF32_OVERRIDE = "NVIDIA_TF32_OVERRIDE"
ONEDNN_FPMATH = ("ONEDNN_DEFAULT_FPMATH_MODE", "DNNL_DEFAULT_FPMATH_MODE", "TF_SET_ONEDNN_FPMATH_MODE")
ENV_VARS = (TF32_OVERRIDE, *ONEDNN_FPMATH)
ORT_ARM64_FASTMATH = "mlas.enable_gemm_fastmath_arm64_bfloat16"


class MathModeMismatch(RuntimeError):
    """A switch reads back something other than what the precision asked for."""


def is_gpu(device: str) -> bool:
    return is_nvidia(device)


def tf32_reason(device: str, device_id: int = 0) -> str | None:
    """Why a ``tf32`` run cannot happen on ``device`` here (None: it can), without a framework."""
    if not is_gpu(device):
        return (
            f"tf32 is NVIDIA's TensorFloat-32 tensor-core mode (compute capability 8.0 or "
            f"newer); on {device} float32 only runs as IEEE fp32: use fp32"
        )
    from dlbench.harness.machine.hardware import nvidia_gpus

    gpus = nvidia_gpus()
    if not gpus:
        return "tf32 needs an NVIDIA GPU, and nvidia-smi found none"
    gpu = gpus[min(device_id, len(gpus) - 1)]
    try:
        cc = tuple(int(x) for x in str(gpu.get("compute_capability") or "").split(".")[:2])
    except ValueError:
        cc = ()
    if len(cc) != 2:
        return f"tf32 needs compute capability 8.0 or newer, and nvidia-smi does not report {gpu['name']}'s"
    if cc < TF32_MIN_CC:
        return (
            f"tf32 needs compute capability 8.0 or newer (Ampere); {gpu['name']} is "
            f"{cc[0]}.{cc[1]}, which computes float32 as IEEE fp32 only"
        )
    return None


def environment(device: str, precision: str) -> dict[str, str]:
    """Variables a GPU cell starts with, so that cuBLAS, cuDNN and TensorRT themselves keep
    float32 IEEE before any of them loads — including what no framework switch reaches
    (ONNX Runtime's TensorRT provider)."""
    if is_gpu(device) and precision != TF32:
        return {TF32_OVERRIDE: "0"}
    return {}


def env_in_force() -> dict[str, str]:
    return {k: os.environ[k] for k in ENV_VARS if k in os.environ}


def check_env(precision: str) -> dict[str, str]:
    """The math variables in force; refuse the ones that contradict ``precision``."""
    env = env_in_force()
    if precision == TF32 and env.get(TF32_OVERRIDE) == "0":
        raise UserError(
            f"--precision tf32: {TF32_OVERRIDE}=0 in the environment forbids TF32 "
            f"in cuBLAS, cuDNN and TensorRT; unset it"
        )
    if precision in ("fp32", TF32):
        for name in ONEDNN_FPMATH:
            if env.get(name, "").strip().upper() not in ("", "STRICT"):
                raise UserError(
                    f"--precision {precision}: {name}={env[name]} in the environment "
                    f"lets oneDNN compute float32 in a narrower type; unset it (or "
                    f"set STRICT)"
                )
    return env


def _expect(mode: dict[str, Any], wanted: dict[str, Any], precision: str) -> dict[str, Any]:
    wrong = {k: mode.get(k) for k, v in wanted.items() if mode.get(k) != v}
    if wrong:
        raise MathModeMismatch(
            f"--precision {precision}: asked for "
            f"{', '.join(f'{k}={wanted[k]}' for k in wrong)}, read back "
            f"{', '.join(f'{k}={v}' for k, v in wrong.items())}"
        )
    return mode


def _refuse_tf32(device: str, precision: str, framework: str) -> None:
    if precision == TF32 and not is_gpu(device):
        raise UserError(f"--precision tf32: {framework} on {device}: " + tf32_reason(device))


# PyTorch >= 2.9 switches (name in the record -> attribute path under torch.backends).
_TORCH_GPU = {
    "torch.cuda.matmul": "cuda.matmul",
    "torch.cudnn.conv": "cudnn.conv",
    "torch.cudnn.rnn": "cudnn.rnn",
}
_TORCH_CPU = {
    "torch.mkldnn.matmul": "mkldnn.matmul",
    "torch.mkldnn.conv": "mkldnn.conv",
    "torch.mkldnn.rnn": "mkldnn.rnn",
}


def torch_math(torch, device: str, precision: str) -> dict[str, Any]:
    """Set PyTorch's float32 switches (GPU: ieee or tf32; oneDNN on the CPU: always ieee)
    and return what they read back.

    PyTorch 2.9 introduced per-backend ``fp32_precision``; its legacy ``allow_tf32``
    readers (``torch.backends.cudnn.flags``, inductor's convolutions) raise when the
    two APIs disagree, and a legacy write resets the new values.  So the legacy flags
    are written first, then the new ones, and both are read back: they agree.  Before
    2.9: ``allow_tf32`` and ``float32_matmul_precision`` only.
    """
    _refuse_tf32(device, precision, "PyTorch")
    env = check_env(precision)
    tf32 = precision == TF32
    gpu_mode = "tf32" if tf32 else "ieee"
    backends = torch.backends
    if hasattr(backends.cuda.matmul, "fp32_precision"):
        with warnings.catch_warnings():  # the legacy API's deprecation notice
            warnings.simplefilter("ignore")
            backends.cuda.matmul.allow_tf32 = tf32
            backends.cudnn.allow_tf32 = tf32
        wanted = {"torch.cuda.matmul.allow_tf32": tf32, "torch.cudnn.allow_tf32": tf32}
        for table, value in ((_TORCH_GPU, gpu_mode), (_TORCH_CPU, "ieee")):
            for name, path in table.items():
                obj = backends
                for part in path.split("."):
                    obj = getattr(obj, part, None)
                if obj is None or not hasattr(obj, "fp32_precision"):
                    continue
                obj.fp32_precision = value
                wanted[name] = value
        switches = _TORCH_GPU | _TORCH_CPU
        mode = {name: _torch_read(backends, switches[name]) for name in wanted if name in switches}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mode.update(
                {
                    "torch.cuda.matmul.allow_tf32": bool(backends.cuda.matmul.allow_tf32),
                    "torch.cudnn.allow_tf32": bool(backends.cudnn.allow_tf32),
                }
            )
    else:
        backends.cuda.matmul.allow_tf32 = tf32
        backends.cudnn.allow_tf32 = tf32
        torch.set_float32_matmul_precision("high" if tf32 else "highest")
        wanted = {
            "torch.cuda.matmul.allow_tf32": tf32,
            "torch.cudnn.allow_tf32": tf32,
            "torch.float32_matmul_precision": "high" if tf32 else "highest",
        }
        mode = {
            "torch.cuda.matmul.allow_tf32": bool(backends.cuda.matmul.allow_tf32),
            "torch.cudnn.allow_tf32": bool(backends.cudnn.allow_tf32),
            "torch.float32_matmul_precision": torch.get_float32_matmul_precision(),
        }
    _expect(mode, wanted, precision)
    return {**mode, "env": env}


def _torch_read(backends, path: str) -> str:
    obj = backends
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj.fp32_precision


def tensorflow_math(tf, device: str, precision: str) -> dict[str, Any]:
    """TensorFlow's one TF32 switch (on by default on Ampere and newer), set and read back;
    oneDNN's float32 math on the CPU follows TF_SET_ONEDNN_FPMATH_MODE, checked with the env."""
    _refuse_tf32(device, precision, "TensorFlow")
    env = check_env(precision)
    tf.config.experimental.enable_tensor_float_32_execution(precision == TF32)
    mode = {"tf.tensor_float_32_execution": bool(tf.config.experimental.tensor_float_32_execution_enabled())}
    _expect(mode, {"tf.tensor_float_32_execution": precision == TF32}, precision)
    return {**mode, "env": env}


def onnxruntime_options(so, precision: str) -> dict[str, str]:
    """Set the session's float32 switches; return the CUDA provider's (``use_tf32``, on by
    default in ONNX Runtime) for the caller to pass when it creates the session."""
    so.add_session_config_entry(ORT_ARM64_FASTMATH, "0")
    return {"use_tf32": "1" if precision == TF32 else "0"}


def onnxruntime_math(session, so, precision: str) -> dict[str, Any]:
    """What the session reads back: the CUDA provider's ``use_tf32`` where it runs, the
    CPU provider's arm64 bf16 fast-math entry, and the TensorRT provider's TF32 (no
    per-session switch in ONNX Runtime: TensorRT's default unless NVIDIA_TF32_OVERRIDE=0)."""
    env = check_env(precision)
    mode: dict[str, Any] = {"ort." + ORT_ARM64_FASTMATH: so.get_session_config_entry(ORT_ARM64_FASTMATH)}
    wanted = dict(mode, **{"ort." + ORT_ARM64_FASTMATH: "0"})
    options = session.get_provider_options()
    if "CUDAExecutionProvider" in options:
        use_tf32 = options["CUDAExecutionProvider"].get("use_tf32")
        mode["ort.cuda.use_tf32"] = use_tf32
        if use_tf32 is not None or precision == TF32:
            wanted["ort.cuda.use_tf32"] = "1" if precision == TF32 else "0"
        elif env.get(TF32_OVERRIDE) != "0":  # an ONNX Runtime older than the option (1.18)
            wanted["ort.cuda.use_tf32"] = "0 (or NVIDIA_TF32_OVERRIDE=0)"
    if "TensorrtExecutionProvider" in options:
        mode["ort.tensorrt.tf32"] = (
            "off (NVIDIA_TF32_OVERRIDE=0)" if env.get(TF32_OVERRIDE) == "0" else "TensorRT's default: on"
        )
        if precision != TF32:
            wanted["ort.tensorrt.tf32"] = "off (NVIDIA_TF32_OVERRIDE=0)"
    _expect(mode, wanted, precision)
    return {**mode, "env": env}


def mindspore_math(ms, target: str, precision: str) -> dict[str, Any]:
    """On Ascend, CANN keeps the graph's own types (``must_keep_origin_dtype``) with HF32 off
    for matmuls and convolutions (CANN enables it for convolutions by default); read back
    from MindSpore's Ascend precision configuration.  Call after ``set_device``, before the
    first graph compiles.  On a GPU build TF32 (on by default for convolutions) is switched
    off, with no getter to read it back; the CPU kernels have no down-conversion switch."""
    if precision == TF32:
        raise UserError(
            f"--precision tf32: dlbench runs MindSpore on the CPU or an Ascend NPU, "
            f"and neither has TF32 (on {target} float32 only runs as IEEE fp32)"
        )
    env = check_env(precision)
    if target == "GPU":  # conv_allow_tf32 defaults to True; there is no getter
        gpu = ms.device_context.gpu.op_precision
        gpu.matmul_allow_tf32(False)
        gpu.conv_allow_tf32(False)
        return {
            "gpu.matmul_allow_tf32": "set False (MindSpore cannot read it back)",
            "gpu.conv_allow_tf32": "set False (MindSpore cannot read it back)",
            "env": env,
        }
    if target != "Ascend":
        return {"mindspore.float32": f"{target} kernels compute float32 in float32 (no switch)", "env": env}
    op = ms.device_context.ascend.op_precision
    for setter, value in (
        (op.precision_mode, "must_keep_origin_dtype"),
        (op.matmul_allow_hf32, False),
        (op.conv_allow_hf32, False),
    ):
        try:
            setter(value)
        except RuntimeError:  # "can not be set repeatedly": the read-back decides
            pass
    try:
        from mindspore._c_expression import AscendOpPrecisionConf
    except ImportError:
        return {"mindspore.ascend": "set, but this MindSpore cannot read the settings back", "env": env}
    conf = AscendOpPrecisionConf.get_instance()
    mode = {
        "ascend.precision_mode": conf.precision_mode(),
        "ascend.matmul_allow_hf32": conf.matmul_allow_hf32(),
        "ascend.conv_allow_hf32": conf.conv_allow_hf32(),
    }
    _expect(
        mode,
        {
            "ascend.precision_mode": "must_keep_origin_dtype",
            "ascend.matmul_allow_hf32": "0",
            "ascend.conv_allow_hf32": "0",
        },
        precision,
    )
    return {**mode, "env": env}


def tensorrt_math(tf32_flag: bool | None, precision: str) -> dict[str, Any]:
    """An engine's TF32 is fixed when it is built (``BuilderFlag.TF32``, on by default in
    TensorRT): the builder's read-back, from this cell's build or the engine's sidecar."""
    env = check_env(precision)
    mode = {"tensorrt.builder_tf32": tf32_flag}
    if tf32_flag is not None and precision in ("fp32", TF32):
        _expect(mode, {"tensorrt.builder_tf32": precision == TF32}, precision)
    return {**mode, "env": env}


def of(runtime: dict[str, Any] | None) -> dict[str, Any] | None:
    """The math mode a runner or session reported, for the record's context."""
    return (runtime or {}).get("math_mode")


def of_runs(**runs: dict[str, Any] | None) -> dict[str, Any]:
    """Math modes of several runs (``outputs`` infos: reference, candidate) by name."""
    return {name: of((info or {}).get("runtime")) for name, info in runs.items()}
