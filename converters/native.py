"""The export cell: the only place a framework is imported for conversion.

One child process per framework (``harness.cell`` kind ``export``) loads the
checkpoint once and does what the payload asks, in this order:

1. ``reference_out``: run the native network on the fixed verification
   batches and save its outputs — the reference every export is judged by;
2. ``export``: write the ONNX / MindIR file with that framework's hop;
3. ``candidate_out``: for a MindIR, which only MindSpore can run, run the
   written file on the same batches and save its outputs.

The parent compares (``converters.verify``); it never imports the framework.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dlbench.converters import verify
from dlbench.converters.base import ExportOptions, export_hop


def child(payload: dict[str, Any]) -> dict[str, Any]:
    from dlbench.models import native
    from dlbench.models.registry import get_model

    framework = payload["framework"]
    spec = get_model(payload["model"]) if payload.get("model") else None
    batches = verify.load_batches(payload["inputs"])
    hop = export_hop(framework)             # imports the framework
    result: dict[str, Any] = {"versions": hop.version()}

    model = None
    if payload.get("checkpoint"):
        mod = native.module(framework)
        start = time.perf_counter()
        model = mod.load(spec, payload["checkpoint"])
        result["load_s"] = time.perf_counter() - start

    if payload.get("reference_out"):
        mod = native.module(framework)
        start = time.perf_counter()
        outputs = [{"logits": mod.predict(model, x)} for x in batches]
        result["reference_s"] = time.perf_counter() - start
        verify.save_outputs(payload["reference_out"], outputs)

    if payload.get("export"):
        options = ExportOptions(**payload["export"]["options"])
        out = Path(payload["export"]["out"])
        start = time.perf_counter()
        result["export"] = hop.export(model, spec, out, options)
        result["convert_s"] = time.perf_counter() - start

    if payload.get("candidate_out"):
        from dlbench.converters.mindspore_to_onnx import run_mindir

        start = time.perf_counter()
        verify.save_outputs(payload["candidate_out"], run_mindir(payload["mindir"], batches))
        result["candidate_s"] = time.perf_counter() - start
    return result
