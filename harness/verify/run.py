"""Outputs of any artifact for verification, through the one runner family.

Verification runs a model as a benchmark does: the backend's ``Runner``
loads it, ``prepare`` places a batch, ``run`` + ``sync`` compute, ``outputs``
reads the result; only the clock is missing.  So "verified" and "benchmarked"
describe the same runner, and one that silently falls back to another device
fails here too (``Runner.verify``).  The settings are the backend's defaults
but for its ``verify_options``: TensorFlow and MindSpore run the reference
eagerly (``--eager``, which a benchmark can ask for too), because compiling
once per verification batch size bought nothing but seconds.

ONNX models run in this process on ONNX Runtime's CPU provider (cheap, and
the parent may import ONNX Runtime); everything else runs in a cell of kind
``outputs``, in the process its framework or engine needs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.core.atomic import scratch
from dlbench.core.errors import UserError, first_line
from dlbench.harness.backends.base import ArtifactRef, RunConfig, Runner
from dlbench.harness.cells import mathmode
from dlbench.harness.cells.payload import Payload
from dlbench.harness.cells.threads import ThreadConfig
from dlbench.harness.formats import default_backend
from dlbench.harness.verify.inputs import load_batches, load_outputs, save_batches, save_outputs


class RunFailed(Exception):
    """A runner's cell failed at run time (a crash, a timeout); the record says why."""

    def __init__(self, message: str, outcome=None):
        super().__init__(message)
        self.outcome = outcome


class BatchFailed(Exception):
    """One verification batch the runner could not take (its size, and why)."""

    def __init__(self, rows: int, cause: BaseException):
        super().__init__(f"batch of {rows}: {first_line(cause)}")
        self.rows, self.cause = rows, cause


def backend_for(ref: ArtifactRef) -> str:
    """The backend that runs an artifact for verification: the engine its format names,
    or for a native checkpoint its own framework."""
    backend = default_backend(ref.format)
    if backend is not None:
        return backend
    raise UserError(f"{ref.path}: dlbench cannot run a {ref.format} artifact to verify it")


def run_config(backend: str, ref: ArtifactRef, threads: ThreadConfig, precision: str = "fp32") -> RunConfig:
    """The backend's defaults and its ``verify_options`` for ``ref``, on the device it must
    run on: verification asks for nothing a benchmark could not, so its outputs come from
    settings a benchmark can reproduce, and the record's ``runtime`` says which."""
    from dlbench.harness.backends import get_backend

    b = get_backend(backend)
    return RunConfig(
        device=b.verify_device,
        precision=precision,
        intra_op_threads=threads.intra_op,
        inter_op_threads=threads.inter_op,
        options=b.resolve_options(b.verify_options(ref)),
    )


def run_batches(runner, batches: Sequence[Any], label: str) -> list[dict[str, np.ndarray]]:
    """One output dict per batch; a batch is one array or a tuple in the model's input order."""
    infos = runner.inputs()
    out = []
    for x in batches:
        xs = x if isinstance(x, (tuple, list)) else (x,)
        if len(xs) != len(infos):
            raise UserError(
                f"{label}: has {len(infos)} inputs, the verification inputs are "
                f"{len(xs)} ({', '.join(t.name for t in infos)})"
            )
        # A float16-I/O model (fp16 without keep_io_types) gets the same values, as float16.
        feeds = {
            t.name: a.astype(np.float16) if t.dtype == "float16" and a.dtype.kind == "f" else a
            for t, a in zip(infos, xs)
        }
        try:
            handle = runner.prepare(feeds)
            runner.run(handle)
            runner.sync()
            out.append({k: np.asarray(v) for k, v in runner.outputs().items()})
        except UserError:
            raise
        except Exception as exc:
            raise BatchFailed(int(xs[0].shape[0]), exc) from exc
    return out


@contextmanager
def loaded(
    ref: ArtifactRef, threads: ThreadConfig, precision: str = "fp32", backend: str | None = None
) -> Iterator[tuple[Runner, dict[str, Any]]]:
    """The runner loaded in this process and what loaded it, closed after the block: for a
    caller that uses the loaded network again (the export cell exports it)."""
    from dlbench.harness.backends import get_backend

    backend = backend or backend_for(ref)
    runner = get_backend(backend).runner(ref, run_config(backend, ref, threads, precision))
    start = time.perf_counter()
    runner.load()
    load_s = time.perf_counter() - start
    try:
        yield runner, {"backend": backend, "load_s": load_s}
    finally:
        runner.close()


def run_loaded(runner: Runner, loaded_as: dict[str, Any], batches: Sequence[Any], label: str):
    """(outputs per batch, what ran) from a runner ``loaded`` gave, checked where it ran."""
    start = time.perf_counter()
    outputs = run_batches(runner, batches, label)
    run_s = time.perf_counter() - start
    runtime = runner.runtime()
    runner.verify(runtime)
    return outputs, {**loaded_as, "runtime": runtime, "run_s": run_s}


def what_ran(reference: dict[str, Any] | None, candidate: dict[str, Any] | None) -> dict[str, Any]:
    """A verification's two sides for a record's context, one shape in ``verify``, ``convert``
    (export, build) records alike: what ran each (backend, load and run seconds, the runner's
    ``runtime``, such as an eager reference's mode) and the math modes each read back."""
    return {
        "reference_run": reference,
        "candidate_run": candidate,
        "math_mode": mathmode.of_runs(reference=reference, candidate=candidate),
    }


def run_here(
    ref: ArtifactRef,
    batches: Sequence[Any],
    threads: ThreadConfig,
    precision: str = "fp32",
    backend: str | None = None,
) -> tuple[list[dict], dict]:
    """Load, run and check the runner in this process: (outputs per batch, what ran)."""
    with loaded(ref, threads, precision, backend) as (runner, loaded_as):
        return run_loaded(runner, loaded_as, batches, ref.path or ref.model)


def outputs(
    ref: ArtifactRef,
    batches: Sequence[Any],
    *,
    threads: ThreadConfig,
    precision: str = "fp32",
    env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> tuple[list[dict], dict]:
    """(outputs per batch, what ran): ONNX here, anything else in its own cell."""
    backend = backend_for(ref)
    from dlbench.harness.backends import get_backend

    if get_backend(backend).verify_in_parent:
        try:
            return run_here(ref, batches, threads, precision, backend)
        except BatchFailed as exc:
            raise UserError(
                f"{ref.path}: {backend} cannot run it on a batch of {exc.rows} "
                f"({first_line(exc.cause)[:300]})"
            ) from None
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - loading it failed after all
            raise UserError(f"{ref.path}: {backend} cannot run it ({first_line(exc)[:300]})") from None
    from dlbench.harness.cells.cellenv import cell_environment
    from dlbench.harness.cells.launcher import run_cell

    env = env if env is not None else cell_environment(threads)
    with scratch("dlbench-verify") as tmp:
        inputs, out = Path(tmp, "inputs.npz"), Path(tmp, "outputs.npz")
        save_batches(inputs, batches)
        payload = OutputsPayload(backend, ref, threads, precision, str(inputs), str(out))
        outcome = run_cell("outputs", payload.to_json(), env=env, timeout=timeout)
        if outcome.status == "usage_error":
            raise UserError(outcome.error)
        if not outcome.ok:
            raise RunFailed(f"{ref.path}: {outcome.error}", outcome)
        info = dict(outcome.result)
        info["cell"] = {"wall_s": outcome.wall_s, "peak_rss_mb": outcome.peak_rss_mb}
        return load_outputs(out), info


@dataclass
class OutputsPayload(Payload):
    """The ``outputs`` cell's message: which runner, on which saved batches."""

    WHAT = "verification"
    VERSION = 1

    backend: str
    artifact: ArtifactRef
    threads: ThreadConfig
    precision: str
    inputs: str  # .npz of the batches (verify.inputs.save_batches)
    outputs: str  # where the cell writes what the model returned


def child(message: dict[str, Any]) -> dict[str, Any]:
    """The ``outputs`` cell: run the saved batches through the backend's runner."""
    payload = OutputsPayload.from_json(message)
    batches = load_batches(payload.inputs)
    outs, info = run_here(payload.artifact, batches, payload.threads, payload.precision, payload.backend)
    save_outputs(payload.outputs, outs)
    return info
