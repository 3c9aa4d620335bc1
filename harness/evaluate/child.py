"""The eval cell: one backend runner loads the artifact and scores every held-out batch.

It runs in its own process (``harness.cells.cell`` kind ``eval``) with the thread
environment the parent chose, like a benchmark cell, and through the same
runners (``harness.backends``: ONNX Runtime sessions, ``models.native``
checkpoints, TensorRT engines), so an accuracy is measured on exactly the
engine a latency is.  Batches are read between runs and nothing is timed but
the whole pass (``time_s``, reading included): this is a quality figure, not
a speed one.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from dlbench.harness.backends import get_backend
from dlbench.harness.evaluate import data
from dlbench.harness.evaluate.payload import EvalPayload
from dlbench.harness.evaluate.scoring import inference_tally


def _feeds(names: list[str], x: Any, casts: list[str]) -> dict[str, np.ndarray]:
    if isinstance(x, dict) and set(names) <= set(x):  # a token reader's inputs, by name
        x = tuple(x[n] for n in names)
    xs = x if isinstance(x, (tuple, list)) else (x,)
    if len(xs) != len(names):
        raise ValueError(
            f"the data gives {len(xs)} inputs, the model takes {len(names)} ({', '.join(names)})"
        )
    # A float16-I/O model (fp16 without keep_io_types) gets the same values as float16.
    return {
        n: np.ascontiguousarray(
            a, dtype=c if c.startswith("float") and np.asarray(a).dtype.kind == "f" else None
        )
        for n, a, c in zip(names, xs, casts)
    }


def run(message: dict[str, Any]) -> dict[str, Any]:
    payload = EvalPayload.from_json(message)
    spec = data.spec_for(payload.spec["model"], payload.spec.get("chw"), payload.spec.get("classes"))
    backend = get_backend(payload.backend)
    runner = backend.runner(payload.artifact, payload.run)
    t0 = time.perf_counter()
    runner.load()
    load_s = time.perf_counter() - t0
    signature = runner.inputs()
    names = [t.name for t in signature]
    casts = [t.dtype for t in signature]
    ds = data.open_heldout(payload.data, spec)
    tally, batches = inference_tally(spec.objective, spec), 0
    t0 = time.perf_counter()
    for x, y in data.heldout_batches(ds, payload.batch_size, payload.limit):
        runner.run(runner.prepare(_feeds(names, x, casts)))
        runner.sync()
        outputs = list(runner.outputs().values())
        if not outputs:
            raise RuntimeError(f"backend {backend.name} returned no outputs")
        tally.add(outputs[0], y)
        batches += 1
    elapsed = time.perf_counter() - t0
    runtime = runner.runtime()
    runner.verify(runtime)
    return {
        "eval": {**tally.result(), "split": ds.eval_split, "time_s": elapsed, "batches": batches},
        "load_s": load_s,
        "runtime": runtime,
        "data": ds.describe(),
        "backend_version": backend.version(),
    }
