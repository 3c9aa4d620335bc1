"""PyTorch's side of the profile cell: torch.profiler over the measured runs, per op the model calls.

The runner is the PyTorch backend's own (``TorchRunner``: eager, bench's threads, device,
precision and math mode).  The warm-up runs are outside the profiler; each measured run
is one annotated range of it.

A node is an op the model calls (``aten::conv2d``, ``aten::linear``), not every op the
profiler lists: conv2d dispatches to convolution, _convolution and mkldnn_convolution,
each an event with its own self time, and summing the events would count the same
microseconds three times.  A node's time is its whole subtree's self times (its total),
so each nested op is counted once, in the node that called it; the op it spent most of
that time in is kept as its ``kernel`` (mkldnn_convolution, addmm).  On CUDA the time is
its kernels' device time, with the CPU's launch time beside it.

Nodes are named by the module that calls them (``layer1.0.conv1/conv2d``): forward
hooks annotate the eager module tree during the profiled runs only.  A TorchScript or
torch.export program runs its ops below its root, so they go by op name; an op that runs
again in the same scope within a run is another node (``relu_1``), as ONNX numbers them.

FLOPs are the profiler's (``with_flops``) where it counts the op, None where it does not:
never estimated here.  Bytes are the node's tensor inputs as recorded (``record_shapes``)
times their dtype's size; None where an input's size is not recorded (a tensor list).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

from dlbench.harness.profile.child import timed_runs

RUN = "dlbench.run"  # the annotation around each measured run
SCOPE = "dlbench.module: "  # ... and around each named module's forward
# The profiler's names of tensor dtypes (record_shapes' input_dtypes), by element size.
DTYPE_BYTES = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::qint8": 1,
    "c10::quint8": 1,
    "c10::qint32": 4,
}
NOT_TENSORS = ("", "Scalar", "ScalarList")  # what else an op's recorded inputs are


def profile_runs(runner, feeds: dict[str, Any], warmup: int, iterations: int, tmp: str) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    runner.load()
    handle = runner.prepare(feeds)
    cuda = runner.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    prof = profile(activities=activities, record_shapes=True, with_flops=True)

    @contextlib.contextmanager
    def profiled() -> Iterator[None]:
        scopes = contextlib.nullcontext() if runner.compiled else module_scopes(torch, runner.model)
        with scopes, prof:
            yield

    wall_ms = timed_runs(runner, handle, warmup, iterations, profiled, lambda: record_function(RUN))
    nodes = node_times(prof.events(), cuda)
    if cuda and nodes and not any(n["us"] for n in nodes):
        # No kernel events (CUPTI missing or busy): zeros would read as free ops.
        raise RuntimeError("the PyTorch profiler recorded no CUDA kernel times (is CUPTI available?)")
    return {
        "wall_ms_per_run": wall_ms,
        "nodes": nodes,
        "node_time": "device time of its CUDA kernels" if cuda else "CPU time, the ops it calls included",
    }


@contextlib.contextmanager
def module_scopes(torch, model) -> Iterator[None]:
    """Each named module's forward inside an annotation of its path, while in this block."""
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    names = {id(m): path for path, m in model.named_modules() if path}
    open_scopes: list[Any] = []

    def enter(module, args) -> None:
        path = names.get(id(module))
        if path is not None:
            scope = torch.profiler.record_function(SCOPE + path)
            scope.__enter__()
            open_scopes.append(scope)

    def leave(module, args, output) -> None:
        if id(module) in names and open_scopes:
            open_scopes.pop().__exit__(None, None, None)

    hooks = [register_module_forward_pre_hook(enter), register_module_forward_hook(leave)]
    try:
        yield
    finally:
        for h in hooks:
            h.remove()


def node_times(events, cuda: bool) -> list[dict[str, Any]]:
    """Each node's time per measured run (µs; device time on CUDA), with its FLOPs and
    input bytes per run, slowest first."""
    runs = [e for e in events if e.name == RUN and _on_cpu(e)]
    totals: dict[str, dict[str, Any]] = {}
    for run in runs:
        seen: dict[str, int] = {}
        for scope, e in _calls(run, ""):
            short = e.name.partition("::")[2] or e.name
            base = f"{scope}/{short}" if scope else short
            k = seen[base] = seen.get(base, -1) + 1
            name = base if k == 0 else f"{base}_{k}"
            row = totals.setdefault(
                name,
                {
                    "node": name,
                    "op": e.name,
                    "kernel": _kernel(e, cuda).name,
                    "scope": scope,
                    "at": len(totals),  # its place in the run: the order nodes first ran in
                    "shapes": [s for s, t in zip(e.input_shapes, e.input_dtypes) if t not in NOT_TENSORS],
                    "us": 0.0,
                    "flops": 0,
                    "bytes": 0,
                },
            )
            row["us"] += e.device_time_total if cuda else e.cpu_time_total
            if cuda:
                row["cpu_us"] = row.get("cpu_us", 0.0) + e.cpu_time_total
            for key, value in (("flops", _flops(e)), ("bytes", _input_bytes(e))):
                row[key] = None if value is None or row[key] is None else row[key] + value
    for row in totals.values():
        for key in ("us", "cpu_us", "flops", "bytes"):
            if row.get(key) is not None:
                row[key] /= len(runs)
    return sorted(totals.values(), key=lambda r: -r["us"])


def _on_cpu(e) -> bool:
    return str(e.device_type).endswith("CPU")


def _calls(event, scope: str) -> Iterator[tuple[str, Any]]:
    """The ops called below ``event`` that no other op called, each with the innermost
    named module around it."""
    for child in event.cpu_children:
        if child.name.startswith(SCOPE):
            yield from _calls(child, child.name[len(SCOPE) :])
        elif "::" in child.name:
            yield scope, child
        else:  # another annotation, a runtime call
            yield from _calls(child, scope)


def _ops_below(e) -> Iterator[Any]:
    yield e
    for child in e.cpu_children:
        yield from _ops_below(child)


def _kernel(e, cuda: bool):
    """The op of ``e``'s subtree with the largest self time: where its time went."""
    ops = [x for x in _ops_below(e) if "::" in x.name]
    return max(ops, key=lambda x: x.self_device_time_total if cuda else x.self_cpu_time_total)


def _flops(e) -> int | None:
    """The profiler's FLOPs of ``e``: its own count, else its callees' (a linear's addmm);
    None where no op of the subtree is counted."""
    if e.flops:
        return int(e.flops)
    counts = [c for c in (_flops(ch) for ch in e.cpu_children) if c is not None]
    return sum(counts) if counts else None


def _input_bytes(e) -> int | None:
    """The bytes of ``e``'s tensor inputs (shape x dtype size); None where one is unknown."""
    total = 0
    for shape, dtype in zip(e.input_shapes, e.input_dtypes):
        if dtype in NOT_TENSORS:
            continue
        size = DTYPE_BYTES.get(dtype)
        if size is None:  # a tensor list (its sizes are not recorded), an unknown dtype
            return None
        total += size * math.prod(shape)
    return total
