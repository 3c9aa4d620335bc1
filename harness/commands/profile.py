"""Where a model's time goes, per op class and per node: ONNX Runtime's profiler for an
ONNX file (OpenVINO's performance counters with --backend openvino), the PyTorch
profiler for a PyTorch model (a zoo name, TorchScript, a torch.export .pt2, a model by
name, --model-from code).

One cell, like a benchmark's, on the backend's own runner (bench's threads, device,
precision and math mode): warm-up runs excluded, then --iterations runs profiled; each
node's time per run, summed per op class beside that class's FLOPs (the source graph's
for ONNX; the PyTorch profiler's per op, with each op's input bytes and FLOP/byte).
Stored as a ``profile`` record.  Exit status: 0 profiled, 1 the cell failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys

HELP = (
    "where a model's time goes, per op class and per node: ONNX files (ONNX Runtime's "
    "profiler, or OpenVINO's counters) and PyTorch models (the PyTorch profiler)"
)


def add_arguments(p) -> None:
    from dlbench.core import flags
    from dlbench.harness.profile.runner import ProfileRequest

    flags.add_arguments(p, ProfileRequest)


def run(args: argparse.Namespace) -> int:
    from dlbench.core import flags
    from dlbench.harness.profile.runner import ProfileRequest, profile
    from dlbench.harness.profile.table import profile_tables

    record = profile(flags.from_args(ProfileRequest, args))
    print(profile_tables(record))
    if record["status"] != "ok":
        print(f"dlbench profile: failed: {record.get('error')}", file=sys.stderr)
    return 0 if record["status"] == "ok" else 1
