"""MindSpore: ``ops.matmul``, ``ops.conv2d`` and the streams in PyNative mode on its CPU kernels.

PyNative is what runs a single op as written (graph mode would compile a
one-op graph per shape and time the same kernels).  PyNative dispatches
asynchronously, so each call waits for its result (``Tensor.data_sync``;
``runtime.synchronize`` refuses the CPU) before it counts as done.  Written
against the public API of 2.x, so that ``--with mindspore==VERSION`` can time
other releases with the same cell.
"""

from __future__ import annotations

from dlbench.harness.cells import mathmode
from dlbench.harness.micro.engines import TRIAD_SCALAR, Kernel

FRAMEWORK = "mindspore"
DEVICES = ("cpu",)
SUPPORTS = {"gemm": ("fp32", "bf16"), "conv": ("fp32",), "memory": ("fp32",)}


def set_threads(ms, threads: int) -> None:
    """MindSpore's CPU kernel threads and one dispatch thread, where this version has the
    setters (2.x moved them between releases; a missing one is left at its default)."""
    for path in ("device_context.cpu.op_tuning.threads_num", "runtime.dispatch_threads_num"):
        obj = ms
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if callable(obj):
            try:
                obj(threads if "op_tuning" in path else 1)
            except (RuntimeError, TypeError, ValueError):
                pass


def build(op, precision, device, inputs, threads) -> Kernel:
    import mindspore as ms
    from mindspore import ops

    if hasattr(ms, "set_device"):
        ms.set_device("CPU")
    else:
        ms.set_context(device_target="CPU")
    set_threads(ms, threads)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    dtype = {"fp32": ms.float32, "bf16": ms.bfloat16}[precision]
    t = {k: ms.Tensor(v).astype(dtype) for k, v in inputs.items()}
    box = {}
    if op.kind == "gemm":

        def call():
            return ops.matmul(t["a"], t["b"])
    elif op.kind == "conv":
        stride, pad = op.dims[6], op.dims[5] // 2

        def call():
            return ops.conv2d(t["x"], t["w"], stride=stride, pad_mode="pad", padding=pad)
    elif op.kernel == "copy":
        # ops.deepcopy is MindSpore's copy kernel; Tensor.copy() took 12x as long for
        # 64 MiB on 2.8 (0.7 GB/s), and ops.identity shares the buffer: no copy at all.
        def call():
            return ops.deepcopy(t["a"])
    else:

        def call():
            return ops.add(t["b"], ops.mul(t["c"], TRIAD_SCALAR))

    def step():
        out = box["out"] = call()
        out.data_sync(True)

    math = mathmode.mindspore_math(ms, "CPU", "fp32")
    notes = ["triad as add(b, mul(c, s)): two kernels"] if op.kernel == "triad" else []
    return Kernel(
        step,
        lambda: box["out"].astype(ms.float32).asnumpy(),
        f"mindspore {ms.__version__}",
        "NCHW" if op.kind == "conv" else "",
        notes,
        math,
    )
