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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlbench.converters.base import ExportOptions, export_hop
from dlbench.harness.backends.base import ArtifactRef
from dlbench.harness.cells.payload import Payload
from dlbench.harness.cells.threads import ThreadConfig
from dlbench.harness.formats import MINDIR, checkpoint_format
from dlbench.harness.verify.inputs import load_batches, save_outputs
from dlbench.harness.verify.run import loaded, run_here, run_loaded


@dataclass
class ExportPayload(Payload):
    """The ``export`` cell's message: the framework computes the reference outputs on the
    saved batches, writes the file, and (MindIR) runs it too."""

    WHAT = "export"
    VERSION = 1

    framework: str
    threads: ThreadConfig
    inputs: str  # .npz of the batches (verify.inputs.save_batches)
    reference_out: str  # where the framework's outputs go
    out: str  # the exported file
    options: ExportOptions
    model: str | None = None  # a zoo model's name
    checkpoint: str | None = None  # a zoo model's checkpoint
    artifact: ArtifactRef | None = None  # a user's own model
    # MindIR: the exported file run by MindSpore, its outputs written here.
    candidate_out: str | None = None


def child(message: dict[str, Any]) -> dict[str, Any]:
    from dlbench.models import native
    from dlbench.models.registry import get_model

    payload = ExportPayload.from_json(message)
    framework, threads = payload.framework, payload.threads
    batches = load_batches(payload.inputs)
    hop = export_hop(framework)  # imports the framework
    result: dict[str, Any] = {"versions": hop.version()}
    if payload.artifact is not None:
        return _user(payload, hop, batches, result)
    if not payload.model:
        raise ValueError("an export payload names a zoo model or carries a user's artifact")
    spec = get_model(payload.model)
    ckpt = str(payload.checkpoint)
    ref = ArtifactRef(ckpt, checkpoint_format(framework), spec.name, framework, ckpt)

    def reload():
        return native.module(framework).load(spec, ckpt)

    with _reference(payload, ref, batches, result, reload) as (_, model):
        start = time.perf_counter()
        result["export"] = hop.export(model, spec, Path(payload.out), payload.options)
        result["convert_s"] = time.perf_counter() - start

    if payload.candidate_out:
        inputs = [{"name": i.name, "dtype": i.dtype, "shape": [None, *i.shape]} for i in spec.inputs]
        ref = ArtifactRef(payload.out, MINDIR, spec.name, "mindspore", meta={"inputs": inputs})
        outputs, info = run_here(ref, batches, threads)
        result["candidate_s"] = info["load_s"] + info["run_s"]
        result["candidate_run"] = info
        save_outputs(payload.candidate_out, outputs)
    return result


@contextmanager
def _reference(
    payload: ExportPayload, ref: ArtifactRef, batches, result: dict[str, Any], reload: Callable[[], Any]
) -> Iterator[tuple[list[dict], Any]]:
    """The reference outputs through the framework's runner (saved for the parent), then
    the network to export: the runner's own where it holds it as the file loads it
    (``Runner.network``), else ``reload()``'s.  The runner stays open through the export."""
    with loaded(ref, payload.threads) as (runner, loaded_as):
        outputs, info = run_loaded(runner, loaded_as, batches, ref.path or ref.model)
        result.update(reference_s=info["load_s"] + info["run_s"], reference_run=info)
        save_outputs(payload.reference_out, outputs)
        start = time.perf_counter()
        model = runner.network()
        result["exported_the_reference_network"] = model is not None
        if model is None:
            model = reload()
        result["load_s"] = time.perf_counter() - start
        yield outputs, model


def _user(payload: ExportPayload, hop, batches, result) -> dict[str, Any]:
    """A user's model: the reference through its framework's runner, then the export with
    the model's own names (the reference's output names) and its largest batch as example."""
    from dlbench.harness import usermodel

    ref = payload.artifact
    assert ref is not None
    source = usermodel.source_of(ref)
    with _reference(payload, ref, batches, result, lambda: usermodel.load(source)[1]) as (outputs, model):
        example = max(batches, key=lambda b: len(b[0]) if isinstance(b, tuple) else len(b))
        example = example if isinstance(example, tuple) else (example,)
        start = time.perf_counter()
        result["export"] = hop.export_user(
            model,
            source,
            usermodel.signature_of(ref),
            list(outputs[0]),
            example,
            Path(payload.out),
            payload.options,
        )
        result["convert_s"] = time.perf_counter() - start
    return result
