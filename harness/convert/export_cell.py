"""The export cell: the only place a framework is imported for conversion.

One child process per framework (``harness.cells.cell`` kind ``export``) does what
the payload asks, in this order:

1. ``reference_out``: run the checkpoint through the framework's own runner
   (the backend ``dlbench bench -b FRAMEWORK`` measures) on the fixed
   verification batches and save its outputs — the reference every export is
   judged by;
2. ``export``: write the ONNX / MindIR file with that framework's hop;
3. ``candidate_out``: for a MindIR, which only MindSpore can run, run the
   written file through MindSpore's runner on the same batches.

The parent compares (``harness.verify.compare``); it never imports the framework.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dlbench.converters.base import ExportOptions, export_hop
from dlbench.harness.backends.base import ArtifactRef
from dlbench.harness.cells.threads import ThreadConfig
from dlbench.harness.formats import MINDIR, checkpoint_format
from dlbench.harness.verify.inputs import load_batches, save_outputs
from dlbench.harness.verify.run import run_here


def child(payload: dict[str, Any]) -> dict[str, Any]:
    from dlbench.models import native
    from dlbench.models.registry import get_model

    framework = payload["framework"]
    batches = load_batches(payload["inputs"])
    threads = ThreadConfig(*payload["threads"])
    hop = export_hop(framework)  # imports the framework
    result: dict[str, Any] = {"versions": hop.version()}
    if payload.get("artifact"):
        return _user(payload, hop, batches, threads, result)
    spec = get_model(payload["model"]) if payload.get("model") else None

    if payload.get("reference_out"):
        ckpt = payload["checkpoint"]
        ref = ArtifactRef(ckpt, checkpoint_format(framework), spec.name, framework, ckpt)
        outputs, info = run_here(ref, batches, threads)
        result["reference_s"] = info["load_s"] + info["run_s"]
        result["reference_run"] = info
        save_outputs(payload["reference_out"], outputs)

    if payload.get("export"):
        start = time.perf_counter()
        model = native.module(framework).load(spec, payload["checkpoint"])
        result["load_s"] = time.perf_counter() - start
        options = ExportOptions(**payload["export"]["options"])
        start = time.perf_counter()
        result["export"] = hop.export(model, spec, Path(payload["export"]["out"]), options)
        result["convert_s"] = time.perf_counter() - start

    if payload.get("candidate_out"):
        inputs = (
            [{"name": i.name, "dtype": i.dtype, "shape": [None, *i.shape]} for i in spec.inputs]
            if spec
            else []
        )
        ref = ArtifactRef(
            payload["mindir"], MINDIR, spec.name if spec else "mindir", "mindspore", meta={"inputs": inputs}
        )
        outputs, info = run_here(ref, batches, threads)
        result["candidate_s"] = info["load_s"] + info["run_s"]
        result["candidate_run"] = info
        save_outputs(payload["candidate_out"], outputs)
    return result


def _user(payload, hop, batches, threads, result) -> dict[str, Any]:
    """A user's model: the reference through its framework's runner, then the export with
    the model's own names (the reference's output names) and its largest batch as example."""
    from dlbench.harness import usermodel

    ref = ArtifactRef(**payload["artifact"])
    outputs, info = run_here(ref, batches, threads)
    result.update(reference_s=info["load_s"] + info["run_s"], reference_run=info)
    save_outputs(payload["reference_out"], outputs)
    start = time.perf_counter()
    source = usermodel.source_of(ref)
    _, model = usermodel.load(source)
    result["load_s"] = time.perf_counter() - start
    example = max(batches, key=lambda b: len(b[0]) if isinstance(b, tuple) else len(b))
    example = example if isinstance(example, tuple) else (example,)
    start = time.perf_counter()
    result["export"] = hop.export_user(
        model,
        source,
        usermodel.signature_of(ref),
        list(outputs[0]),
        example,
        Path(payload["export"]["out"]),
        ExportOptions(**payload["export"]["options"]),
    )
    result["convert_s"] = time.perf_counter() - start
    return result
