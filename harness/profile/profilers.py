"""Each backend's profiler, declared once: what ``dlbench profile`` reads and how.

A profile runs the backend's own runner (threads, device, precision, math mode and the
runtime record exactly as ``bench`` has them) with that backend's profiler around the
measured runs.  Which profiler takes a model follows from the artifact's format: its
default backend's (``harness.formats``), else the first declared whose backend takes the
format (a zoo name: PyTorch's), unless ``--backend`` names another that takes it (OpenVINO
for an ONNX file).  Adding another is one ``PROFILERS.register`` call, under its backend's
name, and its cell function; the refusals read this table.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlbench.core.registry import Registry


@dataclass(frozen=True)
class Profiler:
    backend: str  # the backend whose runner the cell drives
    reads: str  # what it profiles, as the refusal and the help say it
    tool: str  # what times the ops, as the titles and the report say it
    # "module:function" in the cell: (runner, feeds, warmup, iterations, scratch dir) ->
    # {"wall_ms_per_run", "nodes": [{"node", "op", "us", ...}], ...}, the runner not loaded.
    cell: str
    flops_source: str  # where the FLOPs beside the times come from
    bytes_source: str | None = None  # where each op's bytes come from; None: not counted
    # FLOPs counted on the ONNX graph in the parent, per op class (the profiler has none).
    graph_flops: bool = False
    devices: tuple[str, ...] | None = None  # None: every device its backend offers here


PROFILERS: Registry[Profiler] = Registry("profiler")
PROFILERS.register(
    "onnxruntime",
    Profiler(
        "onnxruntime",
        "ONNX files",
        "ONNX Runtime's profiler",
        "dlbench.harness.profile.ort_cell:profile_runs",
        "the source graph at the profiled shapes, by op class",
        "each node's inputs and outputs as its trace records them (shape x dtype size)",
        graph_flops=True,
        # Its CUDA provider's node events time the launches, not the kernels.
        devices=("cpu",),
    ),
)
PROFILERS.register(
    "pytorch",
    Profiler(
        "pytorch",
        "PyTorch models",
        "the PyTorch profiler",
        "dlbench.harness.profile.torch_cell:profile_runs",
        "the PyTorch profiler's count per op where it has one (conv2d, mm, addmm, bmm, "
        "baddbmm, add, mul); other ops' are unknown",
        "each op's tensor inputs as recorded (shape x dtype size; outputs are not recorded)",
    ),
)
PROFILERS.register(
    "openvino",
    Profiler(
        "openvino",
        "ONNX files with --backend openvino",
        "OpenVINO's performance counters",
        "dlbench.harness.profile.ov_cell:profile_runs",
        "the source graph at the profiled shapes, by op class",
        graph_flops=True,
        devices=("cpu",),
    ),
)


def for_format(fmt: str, backend: str | None = None) -> Profiler | None:
    """The profiler that takes an artifact of format ``fmt`` (on ``backend``, where one is
    asked for); None: none does."""
    from dlbench.harness.backends import get_backend
    from dlbench.harness.formats import default_backend

    declared = PROFILERS.all()
    if backend is not None:
        asked = [p for p in declared if p.backend == backend]
        return asked[0] if asked and fmt in get_backend(backend).formats else None
    first = default_backend(fmt)
    found = next((p for p in declared if p.backend == first), None)
    return found or next((p for p in declared if fmt in get_backend(p.backend).formats), None)


def profiled_on(fmt: str) -> list[str]:
    """The backends a profiler reads an artifact of format ``fmt`` on (``--backend``'s
    choices for it), as the refusals name them."""
    return [p.backend for p in PROFILERS.all() if for_format(fmt, p.backend)]


def what_profile_reads() -> str:
    """ "ONNX files (ONNX Runtime's profiler), PyTorch models (the PyTorch profiler) and ..."."""
    parts = [f"{p.reads} ({p.tool})" for p in PROFILERS.all()]
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
