"""The TensorRT runner's memory: device buffers, pinned host mirrors, and the CUDA graph
that replays one enqueue.

Apart from the runner (backends/tensorrt.py) so that what it times reads on its own:
everything here happens in ``prepare``, before the timed region.  It imports no CUDA module:
the runner passes its cuda-python ``cudart`` module in, and every call's status is
checked (``converters.tensorrt_runtime.check``).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

from dlbench.converters.tensorrt_runtime import check


@dataclass
class Buffers:
    """One set of bindings: every tensor's device buffer and pinned host array, per shape."""

    shapes: dict[str, tuple[int, ...]]
    device: dict[str, int] = field(default_factory=dict)
    host: dict[str, Any] = field(default_factory=dict)  # pinned numpy views
    nbytes: dict[str, int] = field(default_factory=dict)
    graph_exec: Any = None


def allocate(rt: Any, buf: Buffers, name: str, shape: tuple[int, ...], dtype: Any) -> None:
    """A device buffer and a pinned host array for ``name``: pinned, so the timed copies
    run at the bus's speed and asynchronously, as trtexec's do."""
    import numpy as np

    count = int(np.prod(shape)) if len(shape) else 1
    nbytes = max(1, count * np.dtype(dtype).itemsize)
    buf.device[name] = int(check(rt.cudaMalloc(nbytes)))
    host_ptr = int(check(rt.cudaMallocHost(nbytes)))
    raw = (ctypes.c_byte * nbytes).from_address(host_ptr)
    buf.host[name] = np.frombuffer(memoryview(raw), dtype=dtype, count=count).reshape(shape)
    buf.nbytes[name] = nbytes


def upload(rt: Any, buf: Buffers, name: str) -> None:
    """The host array's contents to the device, synchronously (before timing)."""
    to_device = rt.cudaMemcpyKind.cudaMemcpyHostToDevice
    check(rt.cudaMemcpy(buf.device[name], buf.host[name].ctypes.data, buf.nbytes[name], to_device))


def capture_graph(rt: Any, context: Any, stream: Any) -> Any:
    """The context's enqueue, captured once as an instantiated CUDA graph to replay."""
    # An enqueue before capture lets TensorRT finish lazy setup outside the graph.
    if not context.execute_async_v3(int(stream)):
        raise RuntimeError("execute_async_v3 failed before graph capture")
    check(rt.cudaStreamSynchronize(stream))
    check(rt.cudaStreamBeginCapture(stream, rt.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal))
    ok = context.execute_async_v3(int(stream))
    graph = check(rt.cudaStreamEndCapture(stream))
    if not ok:
        raise RuntimeError("execute_async_v3 failed during CUDA graph capture")
    try:
        graph_exec = check(rt.cudaGraphInstantiate(graph, 0))
    except TypeError:  # CUDA 11 bindings: (graph, error node buffer, size)
        graph_exec = check(rt.cudaGraphInstantiate(graph, b"", 0))[0]
    check(rt.cudaGraphDestroy(graph))
    return graph_exec
