"""The ``tensorrt`` cell: build an engine with the hop, then run it through the TensorRT runner.

A build runs in its own process so that a builder crash or a CUDA fault is
that build's recorded failure and the parent never imports TensorRT.  The
same process then runs the new engine on the verification batches with the
runner benchmarks use, so what was verified is what will be measured.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dlbench.converters.base import BuildOptions
from dlbench.converters.onnx_to_tensorrt import HOP
from dlbench.harness.backends.base import ArtifactRef
from dlbench.harness.cells.threads import ThreadConfig
from dlbench.harness.formats import TRT_ENGINE
from dlbench.harness.verify.inputs import load_batches, save_outputs
from dlbench.harness.verify.run import run_here


def child(payload: dict[str, Any]) -> dict[str, Any]:
    options = BuildOptions(**{**payload["options"], "batch_sizes": tuple(payload["options"]["batch_sizes"])})
    calibration = load_batches(payload["calibration"]) if payload.get("calibration") else None
    result = HOP.build(
        Path(payload["onnx"]),
        Path(payload["out"]),
        options,
        model_precision=payload["model_precision"],
        calibration=calibration,
        scratch=Path(payload["scratch"]),
    )
    batches = load_batches(payload["inputs"])
    if batches:
        ref = ArtifactRef(
            payload["out"], TRT_ENGINE, payload.get("model") or "engine", meta=result["sidecar"]
        )
        start = time.perf_counter()
        outputs, info = run_here(ref, batches, ThreadConfig.default(), result["sidecar"]["precision"])
        result["candidate_s"] = time.perf_counter() - start
        result["candidate_run"] = info
        save_outputs(payload["outputs"], outputs)
    return result
