"""PyTorch: ``torch.matmul``, ``conv2d``, ``_int_mm`` and in-place streams, on CPU or CUDA.

fp32 is IEEE fp32 on a GPU (``harness.cells.mathmode`` turns TF32 off); tf32 is
float32 in TensorFloat-32 math (a GPU of compute capability 8.0+), and bf16 and fp16
(a GPU) cast the operands once, before the clock.  On CUDA every call is synchronized
before it counts as done.  Outputs are written in place (``out=``) where the
op has it, so the allocator is not what is timed.
"""

from __future__ import annotations

from dlbench.harness.cells import mathmode
from dlbench.harness.micro.engines import TRIAD_SCALAR, Kernel

FRAMEWORK = "torch"
DEVICES = ("cpu", "cuda")
SUPPORTS = {"gemm": ("fp32", "bf16", "int8"), "conv": ("fp32", "bf16"), "memory": ("fp32",)}
WHY_NOT = {p: "only on a GPU (--device cuda)" for p in ("tf32", "fp16")}
SUPPORTS_ON = {
    "cuda": {
        "gemm": ("fp32", "tf32", "fp16", "bf16", "int8"),
        "conv": ("fp32", "tf32", "fp16", "bf16"),
        "memory": ("fp32",),
    }
}


def build(op, precision, device, inputs, threads) -> Kernel:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    dev = torch.device(device)
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("PyTorch sees no CUDA device")
    math = mathmode.torch_math(torch, device, "fp32" if precision == "int8" else precision)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "int8": torch.int8}.get(precision, torch.float32)
    t = {k: torch.from_numpy(v).to(dev, dtype) for k, v in inputs.items()}
    sync = (lambda: torch.cuda.synchronize(dev)) if device == "cuda" else (lambda: None)
    lib = f"torch {torch.__version__}" + (f" (CUDA {torch.version.cuda})" if device == "cuda" else "")
    box = {}
    if op.kind == "gemm" and precision == "int8":

        def step():
            box["out"] = torch._int_mm(t["a"], t["b"])  # int8 x int8 -> int32
            sync()
    elif op.kind == "gemm":
        out = torch.empty(t["a"].shape[0], t["b"].shape[1], device=dev, dtype=dtype)
        box["out"] = out

        def step():
            torch.matmul(t["a"], t["b"], out=out)
            sync()
    elif op.kind == "conv":
        stride, pad = op.dims[6], op.dims[5] // 2

        def step():
            box["out"] = F.conv2d(t["x"], t["w"], stride=stride, padding=pad)
            sync()
    elif op.kernel == "copy":
        out = torch.empty_like(t["a"])
        box["out"] = out

        def step():
            out.copy_(t["a"])
            sync()
    else:
        a = t["a"].clone()
        box["out"] = a

        def step():
            torch.add(t["b"], t["c"], alpha=TRIAD_SCALAR, out=a)
            sync()

    def output():
        out = box["out"]
        if out.device.type != dev.type:
            raise RuntimeError(f"the result is on {out.device}, not {device}")
        return out.float().cpu().numpy()

    return Kernel(step, output, lib, "NCHW" if op.kind == "conv" else "", math=math)
