"""dlbench: train, convert and benchmark one network across frameworks and engines.

The public Python API; the CLI is a thin layer over the same calls.  Importing
``dlbench`` imports no deep-learning framework (each cell runs in its own
process), so ``import dlbench`` is cheap wherever it is done.

    import dlbench
    records = dlbench.bench(["model.onnx"], backends=["onnxruntime"], batch_sizes=[1, 8])
    record = dlbench.build("model.onnx", to="int8")

Each call takes the fields of its request (``dlbench.harness.bench.request.BenchRequest``,
``dlbench.harness.convert.request.BuildRequest``, ``dlbench.harness.pipeline.runner.RunRequest``)
as keyword arguments and returns the records the command would store and print.

The folders beside this file are links to the design card's top-level packages
(``core``, ``models``, ``converters``, ``harness``): with them a checkout *is*
the ``dlbench`` package, so mypy, IDEs and ``python -c 'import dlbench'`` from the
root resolve ``dlbench.*`` with no import hook, and setuptools packages the same tree.
"""

from __future__ import annotations

from typing import Any

from dlbench.core.errors import UserError
from dlbench.core.version import __version__

__all__ = ["UserError", "__version__", "bench", "build", "run"]


def bench(
    artifacts: list[str],
    backends: list[str],
    *,
    show_progress: bool = False,
    refusals: list[str] | None = None,
    **fields: Any,
) -> list[dict[str, Any]]:
    """Benchmark ``artifacts`` on ``backends``: one record per cell (``dlbench bench``).

    A cell its backend refuses (a file that backend cannot read) does not end the sweep,
    as in the CLI: the other cells run and are stored.  Given a ``refusals`` list, each
    refusal's line is appended to it and the records come back; without one, the
    refusals are raised together as one UserError after the sweep."""
    from dlbench.harness.bench.execute import run_bench
    from dlbench.harness.bench.request import BenchRequest

    refused: list[str] = [] if refusals is None else refusals
    records = run_bench(
        BenchRequest(artifacts=list(artifacts), backends=list(backends), **fields),
        show_progress=show_progress,
        refusals=refused,
    )
    if refused and refusals is None:
        raise UserError("; ".join(refused))
    return records


def build(source: str, to: str, *, options: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """Build ``source`` (an ONNX file) into target ``to`` and verify it (``dlbench build``).

    ``options`` are the build options (``converters.base.BuildOptions`` fields)."""
    from dlbench.converters.base import BuildOptions
    from dlbench.harness.convert.build import build as run_build
    from dlbench.harness.convert.request import BuildRequest

    return run_build(BuildRequest(source=source, to=to, options=BuildOptions(**(options or {})), **fields))


def run(
    model: str, *, show_progress: bool = False, **fields: Any
) -> tuple[str, str, dict[str, dict[str, Any]]]:
    """The whole chain for zoo model ``model`` (``dlbench run``): its work folder, the run
    id and each stage's result."""
    from dlbench.harness.pipeline.runner import RunRequest, run_pipeline

    workdir, run_id, results = run_pipeline(RunRequest(model=model, show_progress=show_progress, **fields))
    return str(workdir.root), run_id, results
