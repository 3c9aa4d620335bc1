"""The fixed inputs every verification runs, and how batches travel to a cell.

Inputs are fixed: ``models.synthetic`` images (class patterns plus noise, so
a trained classifier's top-1 means something) or, for token models, token ids
(class words among random ones), from ``VERIFY_SEED``, at two or more batch
sizes (1 and 8 by default), each size its own batch.  The seed is distinct
from the training seed (0 by default) and from the INT8 calibration seed, so
an INT8 model is judged on inputs its calibration never saw.  The same arrays
go through the source and the result.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from dlbench.core.errors import UserError
from dlbench.core.tensors import class_count

VERIFY_SEED = 20_240_917
CALIB_SEED = 31_337
DEFAULT_BATCH_SIZES = (1, 8)


def parse_batch_sizes(
    text: str | Sequence[int] | None, default: Sequence[int] = DEFAULT_BATCH_SIZES
) -> tuple[int, ...]:
    if text is None:
        return tuple(default)
    if isinstance(text, str):
        try:
            sizes = [int(t) for t in text.replace(" ", "").split(",") if t]
        except ValueError:
            raise UserError(f"batch sizes must be comma-separated integers, got {text!r}") from None
    else:
        sizes = [int(t) for t in text]
    if not sizes or any(s < 1 for s in sizes):
        raise UserError(f"batch sizes must be at least 1, got {text!r}")
    return tuple(dict.fromkeys(sizes))


def _image_spec(chw: Sequence[int], num_classes: int):
    """What ``models.synthetic`` reads of a spec: the image shape and the class count."""
    return SimpleNamespace(
        inputs=(SimpleNamespace(shape=tuple(chw), dtype="float32"),), num_classes=max(2, int(num_classes))
    )


def image_inputs(
    chw: Sequence[int], num_classes: int, batch_sizes: Sequence[int], seed: int = VERIFY_SEED
) -> list[np.ndarray]:
    """One NCHW float32 batch per size, from ``models.synthetic`` (class patterns + noise)."""
    from dlbench.models import synthetic

    spec = _image_spec(chw, num_classes)
    return [synthetic.image_batches(spec, b, 1, seed=seed)[0][0] for b in batch_sizes]


def image_stream(
    chw: Sequence[int], num_classes: int, batch: int, n_batches: int, seed: int
) -> list[np.ndarray]:
    """``n_batches`` distinct batches from one generator (calibration sets)."""
    from dlbench.models import synthetic

    return [x for x, _ in synthetic.image_batches(_image_spec(chw, num_classes), batch, n_batches, seed=seed)]


def inputs_for_model(model_name: str, batch_sizes: Sequence[int], seed: int = VERIFY_SEED) -> list[Any]:
    """One batch per size: an NCHW float32 array for image models; for token models
    a tuple of int arrays in ``spec.inputs`` order (``models.synthetic`` class words,
    so a trained classifier's top-1 means something); for a model whose inputs only
    its own data can make (``models.synthetic.OWN_SAMPLE_INPUTS``: DIN's ids, Mask
    R-CNN's image with valid boxes), that data's inputs."""
    from dlbench.models.registry import get_model

    spec = get_model(model_name)
    if _own_inputs(spec):
        return token_stream(spec, batch_sizes, seed)
    return image_inputs(spec.inputs[0].shape, spec.num_classes, batch_sizes, seed)


def _own_inputs(spec) -> bool:
    """True when ``models.synthetic.sample_inputs`` makes the spec's inputs (token ids,
    or an objective's own), not class-pattern images."""
    from dlbench.models import synthetic

    return spec.token_inputs or spec.objective in synthetic.OWN_SAMPLE_INPUTS


def token_stream(spec, batch_sizes: Sequence[int], seed: int) -> list[tuple[np.ndarray, ...]]:
    """Batches of the given sizes from ``models.synthetic.sample_inputs`` (token models,
    and objectives with their own sample inputs), each from its own seed."""
    from dlbench.models import synthetic

    return [synthetic.sample_inputs(spec, b, seed=seed + i) for i, b in enumerate(batch_sizes)]


def asked(given: Any) -> bool:
    """Whether the user set any input option (``bench.input_args.InputFields``): then
    their word decides the inputs, not the zoo's or the class-pattern images."""
    return given is not None and bool(given.shapes or given.int_ranges or given.inputs)


def calibration_stream(
    summary, batch: int, n_batches: int, seed: int = CALIB_SEED, path: str = "model", given: Any = None
) -> list[Any]:
    """INT8 calibration batches for an ONNX file: its zoo model's own sample inputs when
    it is a dlbench token model (or Mask R-CNN: ``_own_inputs``), class-pattern images
    for one NCHW image input, else (or where the user set input options)
    inputs made from its signature (``signature_inputs``)."""
    if asked(given):
        return signature_inputs(summary, [batch] * n_batches, seed, path, given)
    spec = _zoo_spec(summary)
    if spec is not None and _own_inputs(spec):
        return token_stream(spec, [batch] * n_batches, seed)
    if not _one_image(summary):
        return signature_inputs(summary, [batch] * n_batches, seed, path)
    chw, classes = image_shape_of(summary, path)
    return image_stream(chw, classes, batch, n_batches, seed)


def _one_image(summary) -> bool:
    """A zoo image model, or one float32 NCHW input of fixed C, H, W: what the
    class-pattern images fit.  Anything else takes ``signature_inputs``."""
    if _zoo_spec(summary) is not None:
        return True
    if len(summary.inputs) != 1:
        return False
    t = summary.inputs[0]
    return (
        t.dtype == "float32" and len(t.shape) == 4 and all(isinstance(d, int) and d > 0 for d in t.shape[1:])
    )


def signature_inputs(
    summary, batch_sizes: Sequence[int], seed: int, path: str = "model", given: Any = None
) -> list[tuple[np.ndarray, ...]]:
    """Batches for any signature, by the benchmark's input rules (``bench.inputs``),
    each batch from its own seed; dynamic dimensions besides the batch are sized by
    the user's ``--shape`` (``given``, the input group), else by the ``input_shapes`` a
    dlbench export records (the shapes its verification used)."""
    import json

    from dlbench.harness.bench import inputs as planner

    shapes = json.loads(summary.metadata.get("input_shapes") or "{}")
    ranges: dict[str, tuple[int, int]] = {}
    values: dict[str, Any] = {}
    if given is not None:
        shapes, ranges, values = {**shapes, **given.shapes}, given.int_ranges, given.inputs
    tables = _index_ranges(summary, path)
    out = []
    for i, b in enumerate(batch_sizes):
        try:
            plan = planner.plan(summary.inputs, b, shapes, ranges, tables, given=values)
        except UserError as exc:
            recorded = summary.metadata.get("input_shapes")
            hint = "" if recorded else " (or 'dlbench export --shape' records dlbench.input_shapes)"
            raise UserError(f"{path}: {exc}{hint}") from None
        out.append(tuple(planner.synthesize(plan, seed + i).values()))
    return out


def _index_ranges(summary, path: str) -> dict[str, tuple[int, int]]:
    """Integer inputs that index an embedding table -> [0, rows), read from the graph as
    bench reads them: token ids drawn past a table's end fail the Gather.  Only a model
    with an integer input is read, and once per file version (a build asks for its
    verification and its calibration inputs)."""
    import os

    if not any(t.dtype.startswith(("int", "uint")) for t in summary.inputs) or not os.path.isfile(path):
        return {}
    st = os.stat(path)
    return dict(_tables(path, st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=4)
def _tables(path: str, mtime_ns: int, size: int) -> tuple[tuple[str, tuple[int, int]], ...]:
    import onnx

    from dlbench.harness.bench.onnxinfo import embedding_ranges

    return tuple(embedding_ranges(onnx.load(path, load_external_data=False)).items())


def _zoo_spec(summary):
    """The zoo spec an ONNX file names in its metadata, or None."""
    name = summary.metadata.get("model")
    if not name:
        return None
    from dlbench.models.registry import get_model

    try:
        return get_model(name)
    except UserError:
        return None


def image_shape_of(summary, path: str = "model") -> tuple[tuple[int, ...], int]:
    """(C, H, W) and class count of a single-input NCHW float32 ONNX model."""
    model_name = summary.metadata.get("model")
    if model_name:
        from dlbench.models.registry import get_model

        try:
            spec = get_model(model_name)
            return tuple(spec.inputs[0].shape), spec.num_classes
        except UserError:
            pass  # a model this dlbench does not know: use the shape
    if len(summary.inputs) != 1:
        raise UserError(
            f"{path}: has {len(summary.inputs)} inputs; dlbench verifies single-input image models"
        )
    inp = summary.inputs[0]
    if inp.dtype != "float32" or len(inp.shape) != 4:
        raise UserError(
            f"{path}: input {inp.name!r} is {inp.dtype} {inp.shape}; dlbench "
            f"verifies NCHW float32 image inputs"
        )
    rest = inp.shape[1:]
    if not all(isinstance(d, int) and d > 0 for d in rest):
        raise UserError(
            f"{path}: input {inp.name!r} has dynamic non-batch dimensions "
            f"{inp.shape}; export it with fixed C, H, W"
        )
    classes = class_count(summary.outputs[0]) if summary.outputs else None
    return tuple(rest), classes or 10


def inputs_for_onnx(
    summary, batch_sizes: Sequence[int], seed: int = VERIFY_SEED, path: str = "model", given: Any = None
) -> list[Any]:
    """Inputs for an ONNX file: the user's input options where they set any; its zoo
    model's if dlbench exported it; else from its shape."""
    if asked(given):
        return signature_inputs(summary, batch_sizes, seed, path, given)
    spec = _zoo_spec(summary)
    if spec is not None and _own_inputs(spec):
        return token_stream(spec, batch_sizes, seed)
    if not _one_image(summary):
        return signature_inputs(summary, batch_sizes, seed, path)
    chw, classes = image_shape_of(summary, path)
    return image_inputs(chw, classes, batch_sizes, seed)


# --- batches and outputs as .npz, for cells ---------------------------------------------


def save_batches(path, batches: Sequence[Any]) -> None:
    """Batches as one .npz: ``b{i}`` for one array, ``b{i}/{j}`` for a tuple of inputs."""
    arrays = {}
    for i, x in enumerate(batches):
        if isinstance(x, (tuple, list)):
            arrays.update({f"b{i}/{j}": a for j, a in enumerate(x)})
        else:
            arrays[f"b{i}"] = x
    np.savez(path, **arrays)


def load_batches(path) -> list[Any]:
    with np.load(path) as data:
        parts: dict[int, dict[int, np.ndarray]] = {}
        single: dict[int, np.ndarray] = {}
        for key in data.files:
            head, _, j = key[1:].partition("/")
            if j:
                parts.setdefault(int(head), {})[int(j)] = data[key]
            else:
                single[int(head)] = data[key]
    batches = {**single, **{i: tuple(p[j] for j in sorted(p)) for i, p in parts.items()}}
    return [batches[i] for i in sorted(batches)]


def save_outputs(path, outputs: Sequence[dict[str, np.ndarray]]) -> None:
    """Outputs per batch as one .npz: ``{index}/{output name}`` keys."""
    np.savez(path, **{f"{i}/{name}": np.asarray(v) for i, d in enumerate(outputs) for name, v in d.items()})


def load_outputs(path) -> list[dict[str, np.ndarray]]:
    result: dict[int, dict[str, np.ndarray]] = {}
    with np.load(path) as data:
        for key in data.files:
            i, _, name = key.partition("/")
            result.setdefault(int(i), {})[name] = data[key]
    return [result[i] for i in sorted(result)]
