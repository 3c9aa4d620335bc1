"""The one verifier every hop uses: same inputs through source and result, compared.

A benchmark of a converted model is worthless if the conversion changed what
the model computes, so every export and build ends here, and so does
``dlbench verify REFERENCE CANDIDATE``.

Inputs are fixed: ``models.synthetic`` images (class patterns plus noise, so
a trained classifier's top-1 means something) or, for token models, token ids
(class words among random ones), from ``VERIFY_SEED``, at two
or more batch sizes (1 and 8 by default), each size its own batch.  The seed
is distinct from the training seed (0 by default) and from the INT8
calibration seed, so an INT8 model is judged on inputs its calibration never
saw.  The same arrays go through the source and the result.

Per output, over all batches together, the verdict reports:

* ``max_abs`` — largest |candidate − reference|, and where it is (batch size,
  sample, element index);
* ``max_rel`` — ``max_abs`` divided by the largest |reference| of that output
  (relative to the output's scale: element-wise relative error is meaningless
  for logits that cross zero);
* ``mean_abs`` — mean |candidate − reference|;
* ``cosine`` — cosine similarity of candidate and reference, per sample; the
  smallest (worst) sample is reported;
* ``top1`` — for classifier outputs (rank 2, more than one class): the
  fraction of samples whose arg-max agrees.

Default tolerances (``TOLERANCES``), chosen from what each precision can
honestly promise:

=========  ==============================================  ===========  ==========
precision  max_abs bound                                   min cosine   min top-1
=========  ==============================================  ===========  ==========
fp32       1e-5 + 1e-3 × max|ref|                          0.99999      reported
fp16       1e-3 + 2e-2 × max|ref|                          0.999        reported
int8       1e-3 + 0.5 × max|ref|                           0.98         0.9
=========  ==============================================  ===========  ==========

fp32 is a different order of the same arithmetic, so it must agree to about
single-precision accumulation error over a deep network (ResNet-50 exports
measure about 1e-5 of max|ref| here, a hundredfold margin); fp16 has a
10-bit mantissa; int8 changes every value by design, so it is judged by what
a user of a classifier sees (top-1 agreement) and by the direction of the
logit vector (cosine), plus a loose magnitude bound that catches what those
two cannot see — logits scaled by a wrong final-layer scale keep their
direction and their arg-max.  Top-1 is reported, not gated, for fp32/fp16:
when the max_abs bound holds, a disagreement can only be a near-tie.  Any
NaN/Inf or shape mismatch fails at every precision.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

import numpy as np

from dlbench.models.errors import UserError, first_line

VERIFY_SEED = 20_240_917
CALIB_SEED = 31_337
DEFAULT_BATCH_SIZES = (1, 8)


@dataclass(frozen=True)
class Tolerance:
    precision: str
    atol: float | None           # max_abs <= atol + rtol * max|ref|; None: not gated
    rtol: float | None
    min_cosine: float
    min_top1: float | None       # classifiers only; None: reported, not gated

    def bound(self, ref_absmax: float) -> float | None:
        if self.atol is None or self.rtol is None:
            return None
        return self.atol + self.rtol * ref_absmax


TOLERANCES = {
    "fp32": Tolerance("fp32", atol=1e-5, rtol=1e-3, min_cosine=0.99999, min_top1=None),
    "fp16": Tolerance("fp16", atol=1e-3, rtol=2e-2, min_cosine=0.999, min_top1=None),
    "int8": Tolerance("int8", atol=1e-3, rtol=0.5, min_cosine=0.98, min_top1=0.9),
}
# "best" lets TensorRT pick int8 kernels where it likes: judged as int8.
TOLERANCES["best"] = replace(TOLERANCES["int8"], precision="best")
PRECISIONS = tuple(TOLERANCES)


def tolerance(precision: str, **overrides: float | None) -> Tolerance:
    try:
        tol = TOLERANCES[precision]
    except KeyError:
        raise UserError(f"unknown precision {precision!r}; choose from "
                        f"{', '.join(TOLERANCES)}") from None
    given = {k: v for k, v in overrides.items() if v is not None}
    for name, value in given.items():
        if value < 0 or (name in ("min_cosine", "min_top1") and value > 1):
            raise UserError(f"--{name.replace('_', '-')} {value}: out of range")
    return replace(tol, **given)


def parse_batch_sizes(text: str | Sequence[int] | None,
                      default: Sequence[int] = DEFAULT_BATCH_SIZES) -> tuple[int, ...]:
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


# --- inputs ------------------------------------------------------------------------------

def _image_spec(chw: Sequence[int], num_classes: int):
    """What ``models.synthetic`` reads of a spec: the image shape and the class count."""
    return SimpleNamespace(inputs=(SimpleNamespace(shape=tuple(chw), dtype="float32"),),
                           num_classes=max(2, int(num_classes)))


def image_inputs(chw: Sequence[int], num_classes: int, batch_sizes: Sequence[int],
                 seed: int = VERIFY_SEED) -> list[np.ndarray]:
    """One NCHW float32 batch per size, from ``models.synthetic`` (class patterns + noise)."""
    from dlbench.models import synthetic

    spec = _image_spec(chw, num_classes)
    return [synthetic.image_batches(spec, b, 1, seed=seed)[0][0] for b in batch_sizes]


def image_stream(chw: Sequence[int], num_classes: int, batch: int, n_batches: int,
                 seed: int) -> list[np.ndarray]:
    """``n_batches`` distinct batches from one generator (calibration sets)."""
    from dlbench.models import synthetic

    return [x for x, _ in synthetic.image_batches(_image_spec(chw, num_classes), batch,
                                                  n_batches, seed=seed)]


def inputs_for_model(model_name: str, batch_sizes: Sequence[int],
                     seed: int = VERIFY_SEED) -> list[Any]:
    """One batch per size: an NCHW float32 array for image models; for token models
    a tuple of int arrays in ``spec.inputs`` order (``models.synthetic`` class words,
    so a trained classifier's top-1 means something)."""
    from dlbench.models.registry import get_model

    spec = get_model(model_name)
    if spec.token_inputs:
        return token_stream(spec, batch_sizes, seed)
    return image_inputs(spec.inputs[0].shape, spec.num_classes, batch_sizes, seed)


def token_stream(spec, batch_sizes: Sequence[int], seed: int) -> list[tuple[np.ndarray, ...]]:
    """Token-model batches of the given sizes from one generator (distinct batches)."""
    from dlbench.models import synthetic

    return [synthetic.sample_inputs(spec, b, seed=seed + i) for i, b in enumerate(batch_sizes)]


def calibration_stream(summary, batch: int, n_batches: int, seed: int = CALIB_SEED,
                       path: str = "model") -> list[Any]:
    """INT8 calibration batches for an ONNX file: its zoo model's token inputs when it
    is a dlbench token model, else class-pattern images of its input shape."""
    spec = _zoo_spec(summary)
    if spec is not None and spec.token_inputs:
        return token_stream(spec, [batch] * n_batches, seed)
    chw, classes = image_shape_of(summary, path)
    return image_stream(chw, classes, batch, n_batches, seed)


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
            pass                          # a model this dlbench does not know: use the shape
    if len(summary.inputs) != 1:
        raise UserError(f"{path}: has {len(summary.inputs)} inputs; dlbench verifies "
                        f"single-input image models")
    inp = summary.inputs[0]
    if inp.dtype != "float32" or len(inp.shape) != 4:
        raise UserError(f"{path}: input {inp.name!r} is {inp.dtype} {inp.shape}; dlbench "
                        f"verifies NCHW float32 image inputs")
    rest = inp.shape[1:]
    if not all(isinstance(d, int) and d > 0 for d in rest):
        raise UserError(f"{path}: input {inp.name!r} has dynamic non-batch dimensions "
                        f"{inp.shape}; export it with fixed C, H, W")
    out = summary.outputs[0].shape if summary.outputs else []
    classes = out[-1] if out and isinstance(out[-1], int) else 10
    return tuple(rest), classes


def inputs_for_onnx(summary, batch_sizes: Sequence[int], seed: int = VERIFY_SEED,
                    path: str = "model") -> list[Any]:
    """Inputs for an ONNX file: its zoo model's if dlbench exported it, else from its shape."""
    spec = _zoo_spec(summary)
    if spec is not None and spec.token_inputs:
        return token_stream(spec, batch_sizes, seed)
    chw, classes = image_shape_of(summary, path)
    return image_inputs(chw, classes, batch_sizes, seed)


# --- comparison --------------------------------------------------------------------------

@dataclass
class OutputVerdict:
    name: str
    ok: bool
    shape: list[int]
    max_abs: float
    max_rel: float
    mean_abs: float
    cosine: float
    ref_absmax: float
    top1: float | None = None
    bound: float | None = None
    worst: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


@dataclass
class Verdict:
    ok: bool
    precision: str
    tolerance: dict[str, Any]
    batch_sizes: list[int]
    seed: int
    outputs: list[OutputVerdict]
    message: str

    @property
    def worst(self) -> OutputVerdict | None:
        failing = [o for o in self.outputs if not o.ok] or self.outputs
        return max(failing, key=lambda o: (not o.ok, o.max_rel)) if failing else None

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "precision": self.precision, "tolerance": self.tolerance,
                "batch_sizes": self.batch_sizes, "seed": self.seed, "message": self.message,
                "outputs": {o.name: asdict(o) for o in self.outputs}}


def _cosines(ref: np.ndarray, cand: np.ndarray) -> np.ndarray:
    r = ref.reshape(ref.shape[0], -1).astype(np.float64)
    c = cand.reshape(cand.shape[0], -1).astype(np.float64)
    num = (r * c).sum(axis=1)
    den = np.linalg.norm(r, axis=1) * np.linalg.norm(c, axis=1)
    both_zero = (den == 0) & (np.abs(r).max(axis=1, initial=0) == 0) & \
                (np.abs(c).max(axis=1, initial=0) == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)
    return np.where(both_zero, 1.0, cos)


def _is_classifier(shape: Sequence[int]) -> bool:
    return len(shape) == 2 and shape[1] > 1


def compare(reference: Sequence[dict[str, np.ndarray]], candidate: Sequence[dict[str, np.ndarray]],
            tol: Tolerance, batch_sizes: Sequence[int], seed: int = VERIFY_SEED) -> Verdict:
    """Compare per-batch outputs (one dict per batch size, same order) against ``tol``."""
    if len(reference) != len(candidate) or len(reference) != len(batch_sizes):
        raise ValueError("reference, candidate and batch_sizes differ in length")
    ref_names = list(reference[0])
    cand_names = list(candidate[0])
    if len(ref_names) != len(cand_names):
        return _mismatch(tol, batch_sizes, seed,
                         f"the reference has {len(ref_names)} outputs, the candidate "
                         f"{len(cand_names)} ({', '.join(cand_names)})")
    # Outputs pair by name when the names agree, else by position (exporters rename).
    pairs = ([(n, n) for n in ref_names] if set(ref_names) == set(cand_names)
             else list(zip(ref_names, cand_names)))
    verdicts = []
    for ref_name, cand_name in pairs:
        verdicts.append(_compare_output(cand_name, [r[ref_name] for r in reference],
                                        [c[cand_name] for c in candidate], tol, batch_sizes))
    ok = all(v.ok for v in verdicts)
    verdict = Verdict(ok=ok, precision=tol.precision, tolerance=asdict(tol),
                      batch_sizes=list(batch_sizes), seed=seed, outputs=verdicts, message="")
    verdict.message = _message(verdict)
    return verdict


def _mismatch(tol, batch_sizes, seed, why: str) -> Verdict:
    return Verdict(ok=False, precision=tol.precision, tolerance=asdict(tol),
                   batch_sizes=list(batch_sizes), seed=seed, outputs=[], message=why)


def _compare_output(name: str, refs: list[np.ndarray], cands: list[np.ndarray], tol: Tolerance,
                    batch_sizes: Sequence[int]) -> OutputVerdict:
    failures = []
    for b, r, c in zip(batch_sizes, refs, cands):
        r, c = np.asarray(r), np.asarray(c)
        if r.shape != c.shape:
            return OutputVerdict(name, False, list(c.shape), math.inf, math.inf, math.inf, 0.0,
                                 0.0, failures=[f"at batch {b} the shape is {list(c.shape)}, "
                                                f"the reference's {list(r.shape)}"])
    ref = np.concatenate([np.asarray(r, dtype=np.float64) for r in refs])
    cand = np.concatenate([np.asarray(c, dtype=np.float64) for c in cands])
    shape = [int(s) for s in refs[0].shape[1:]]
    if not np.isfinite(cand).all():
        bad = int((~np.isfinite(cand)).sum())
        failures.append(f"{bad} values are NaN or Inf")
    diff = np.abs(cand - ref)
    diff = np.where(np.isfinite(diff), diff, np.inf)
    flat = int(np.argmax(diff)) if diff.size else 0
    sample, *index = np.unravel_index(flat, diff.shape) if diff.size else (0,)
    batch_of, offset = _locate(int(sample), batch_sizes)
    max_abs = float(diff.max()) if diff.size else 0.0
    ref_absmax = float(np.abs(ref).max()) if ref.size else 0.0
    max_rel = max_abs / ref_absmax if ref_absmax > 0 else (0.0 if max_abs == 0 else math.inf)
    mean_abs = float(diff.mean()) if diff.size else 0.0
    cosines = _cosines(ref, np.nan_to_num(cand)) if ref.size else np.ones(1)
    cosine = float(cosines.min())
    top1 = None
    if _is_classifier(ref.shape):
        top1 = float((ref.argmax(axis=1) == np.nan_to_num(cand).argmax(axis=1)).mean())
    bound = tol.bound(ref_absmax)
    if bound is not None and max_abs > bound:
        failures.append(f"max abs diff {max_abs:.3g} > {tol.atol:g} + {tol.rtol:g} × "
                        f"{ref_absmax:.3g} = {bound:.3g}")
    if cosine < tol.min_cosine:
        worst_sample = int(np.argmin(cosines))
        wb, wo = _locate(worst_sample, batch_sizes)
        failures.append(f"cosine {cosine:.6f} < {tol.min_cosine:g} (batch {wb}, sample {wo})")
    if tol.min_top1 is not None and top1 is not None and top1 < tol.min_top1:
        failures.append(f"top-1 agreement {top1:.1%} < {tol.min_top1:.0%}")
    worst = {"batch_size": batch_of, "sample": offset, "index": [int(i) for i in index],
             "reference": float(ref.flat[flat]) if ref.size else None,
             "candidate": float(cand.flat[flat]) if cand.size else None}
    return OutputVerdict(name, not failures, shape, max_abs, max_rel, mean_abs, cosine,
                         ref_absmax, top1, bound, worst, failures)


def _locate(sample: int, batch_sizes: Sequence[int]) -> tuple[int, int]:
    """Which batch (by size) and which sample in it a concatenated row index is."""
    for b in batch_sizes:
        if sample < b:
            return b, sample
        sample -= b
    return batch_sizes[-1], sample


def _message(v: Verdict) -> str:
    if v.ok:
        worst = v.worst
        extra = f", top-1 {worst.top1:.0%}" if worst and worst.top1 is not None else ""
        return (f"within {v.precision} tolerance at batch sizes "
                f"{','.join(map(str, v.batch_sizes))} (worst output {worst.name}: max abs "
                f"{worst.max_abs:.3g}, cosine {worst.cosine:.6f}{extra})" if worst else "no outputs")
    w = v.worst
    if w is None:
        return v.message or "no outputs to compare"
    where = w.worst
    loc = (f" at batch {where['batch_size']}, sample {where['sample']}, index "
           f"{where['index']} (reference {where['reference']:.6g}, candidate "
           f"{where['candidate']:.6g})" if where and where.get("reference") is not None else "")
    return f"output {w.name} over {v.precision} tolerance: {'; '.join(w.failures)}{loc}"


# --- outputs through ONNX Runtime (the parent may import it; frameworks run in cells) ----

def onnx_outputs(path, batches: Sequence[Any], threads: int | None = None,
                 input_name: str | None = None) -> list[dict[str, np.ndarray]]:
    """Outputs per batch; a batch is one array or a tuple in the graph's input order."""
    from dlbench.converters import onnx_io

    sess = onnx_io.session(path, threads=threads)
    inputs = sess.get_inputs()
    arity = len(batches[0]) if batches and isinstance(batches[0], (tuple, list)) else 1
    if len(inputs) != arity:
        raise UserError(f"{path}: has {len(inputs)} inputs, the verification inputs are "
                        f"{arity} ({', '.join(i.name for i in inputs)})")
    in_names = [input_name] if input_name and arity == 1 else [i.name for i in inputs]
    # A float16-I/O model (fp16 without keep_io_types) gets the same values, as float16.
    casts = [np.float16 if i.type == "tensor(float16)" else None for i in inputs]
    names = [o.name for o in sess.get_outputs()]
    out = []
    for x in batches:
        xs = x if isinstance(x, (tuple, list)) else (x,)
        feed = {n: a if c is None else a.astype(c) for n, a, c in zip(in_names, xs, casts)}
        try:
            values = sess.run(names, feed)
        except Exception as exc:  # noqa: BLE001 - a shape the graph cannot take, ...
            first = first_line(exc)
            raise UserError(f"{path}: onnxruntime cannot run it on a batch of "
                            f"{xs[0].shape[0]} ({first[:300]})") from None
        out.append(dict(zip(names, values)))
    return out


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
    np.savez(path, **{f"{i}/{name}": np.asarray(v) for i, d in enumerate(outputs)
                      for name, v in d.items()})


def load_outputs(path) -> list[dict[str, np.ndarray]]:
    result: dict[int, dict[str, np.ndarray]] = {}
    with np.load(path) as data:
        for key in data.files:
            i, _, name = key.partition("/")
            result.setdefault(int(i), {})[name] = data[key]
    return [result[i] for i in sorted(result)]


# --- dlbench verify REFERENCE CANDIDATE ----------------------------------------------------

@dataclass
class VerifyRequest:
    reference: str
    candidate: str
    precision: str | None = None           # None: the candidate's own
    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    seed: int = VERIFY_SEED
    framework: str | None = None           # for a bare checkpoint
    model: str | None = None
    overrides: dict[str, float | None] = field(default_factory=dict)
    threads: int | None = None
    db: str | None = None
    json_path: str | None = None
    timeout: float | None = None
    argv: list[str] | None = None


def verify_files(req: VerifyRequest) -> dict[str, Any]:
    """Run both files on the same fixed inputs and judge the candidate; one ``verify`` record."""
    import time

    from dlbench.converters import onnx_io, records, sources
    from dlbench.models.atomic import check_can_create, write_json
    from dlbench.harness.context import new_run_id, now_iso
    from dlbench.harness.results import ResultStore
    from dlbench.harness.threads import ThreadConfig, in_force

    batch_sizes = parse_batch_sizes(req.batch_sizes)
    if req.threads is not None and req.threads < 1:
        raise UserError(f"--threads must be at least 1, got {req.threads}")
    ref = sources.identify(req.reference, req.framework, req.model)
    cand = sources.identify(req.candidate, req.framework, req.model)
    precision = req.precision or cand.precision
    tol = tolerance(precision, **req.overrides)
    if cand.kind == "tensorrt":
        profile = next(iter((cand.meta.get("profile") or {}).values()), None)
        if profile:
            lo, hi = profile["min"][0], profile["max"][0]
            outside = [b for b in batch_sizes if not lo <= b <= hi]
            if outside:
                raise UserError(f"--batch-sizes {','.join(map(str, outside))}: outside the "
                                f"engine's profile, batch {lo} to {hi}")
    if req.json_path:
        check_can_create(req.json_path)
    ResultStore(req.db).check_writable()
    inputs = sources.inputs_for(ref, cand, batch_sizes, req.seed)
    threads = ThreadConfig.default(req.threads)
    env = threads.environment()
    identity = {"reference": _identity_of(ref), "candidate": _identity_of(cand),
                "precision": precision, "batch_sizes": list(batch_sizes), "seed": req.seed}
    record = records.new_record("verify", run_id=new_run_id(), identity=identity,
                                started=now_iso(), argv=req.argv,
                                device="gpu" if cand.kind == "tensorrt" else "cpu")
    record.update({"model": ref.model or cand.model, "framework": ref.framework or cand.framework,
                   "backend": cand.artifact_format or cand.kind, "precision": precision,
                   "intra_op_threads": threads.intra_op, "inter_op_threads": threads.inter_op})
    record["context"].update({"reference": {"path": str(ref.path.resolve()), "kind": ref.kind},
                              "candidate": {"path": str(cand.path.resolve()), "kind": cand.kind},
                              "thread_environment": in_force(env)})
    start = time.perf_counter()
    verdict, error = None, None
    try:
        ref_out, ref_info = sources.outputs(ref, inputs, env=env, timeout=req.timeout,
                                            threads=threads.intra_op)
        cand_out, cand_info = sources.outputs(cand, inputs, env=env, timeout=req.timeout,
                                              threads=threads.intra_op)
        record["context"].update(reference_run=ref_info, candidate_run=cand_info)
        verdict = compare(ref_out, cand_out, tol, batch_sizes, req.seed)
    except sources.RunFailed as exc:
        error = str(exc)
        if exc.outcome is not None:
            record["context"].update(traceback=exc.outcome.traceback, log_tail=exc.outcome.log_tail)
    record["duration_s"] = time.perf_counter() - start
    record["metrics"]["verify_s"] = record["duration_s"]
    records.finish(record, verdict, error=error)
    artifact = None
    if cand.artifact_format and verdict is not None:
        sha = onnx_io.sha256(cand.path)
        source_sha = (onnx_io.sha256(ref.checkpoint) if ref.kind == "checkpoint"
                      else onnx_io.sha256(ref.path) if ref.path.is_file() else None)
        artifact = records.artifact_row(cand.path, sha, cand.artifact_format, precision,
                                        model=record["model"], framework=record["framework"],
                                        hop="verify", source_path=ref.checkpoint or ref.path,
                                        source_sha256=source_sha)
        record["context"]["candidate"]["sha256"] = sha
        if cand.summary is not None:
            record["metrics"]["node_count"] = cand.summary.node_count
        record["metrics"]["file_size_bytes"] = cand.path.stat().st_size
    records.store(req.db, record, artifact)
    if req.json_path:
        write_json(req.json_path, [record])
    return record


def _identity_of(source) -> dict[str, Any]:
    from dlbench.converters import onnx_io

    path = source.checkpoint if source.kind == "checkpoint" else source.path
    return {"kind": source.kind, "sha256": onnx_io.sha256(path) if Path(path).is_file() else None}
