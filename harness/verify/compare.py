"""The comparator: the one judge of every hop, reference outputs against candidate outputs.

A benchmark of a converted model is worthless if the conversion changed what
the model computes, so every export and build ends here, and so does
``dlbench verify REFERENCE CANDIDATE``.  Both sides ran through the same
runner family (``harness.verify.run``) on the same inputs
(``harness.verify.inputs``); this module only judges.

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
* ``top1`` — for classifier outputs ((batch, classes), or (batch, classes,
  1, 1) from a 1×1-convolution head): the fraction of samples whose arg-max
  agrees, counted over the samples whose reference margin (best minus second
  best score) exceeds the precision's ``top1_margin`` × max|ref|
  (``top1_judged`` of ``top1_samples``): a near-tie flips on any rounding, so
  it says nothing about the build (random weights give near-uniform scores);
  with no such sample, top-1 is not judged.

A reference whose every output is the same for every input (a random-weight
network whose head saturates: Keras' MobileNetV2 gives exactly 0.001 for every
class) cannot tell a right candidate from a wrong one: the verdict is "cannot
judge" (``judged`` false, not ok), never a pass on max abs 0.

Default tolerances (``TOLERANCES``), chosen from what each precision can
honestly promise:

=========  ======================================  ==========  =========  ==========
precision  max_abs bound                           min cosine  min top-1  top-1 margin
=========  ======================================  ==========  =========  ==========
fp32       1e-5 + 1e-3 × max|ref|                  0.99999     reported   1e-4
fp16       1e-3 + 2e-2 × max|ref|                  0.999       reported   5e-3
int8       1e-3 + 0.5 × max|ref|                   0.98        0.9        0.05
=========  ======================================  ==========  =========  ==========

The int8 margin: a build that keeps cosine 0.999 moves a 1000-class logit by
about 1.5 % of max|ref|, so a sample closer to a tie than 5 % is a coin toss.

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
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from dlbench.core.errors import UserError
from dlbench.harness.evaluate.scoring import class_scores
from dlbench.harness.verify.inputs import VERIFY_SEED


@dataclass(frozen=True)
class Tolerance:
    precision: str
    atol: float | None  # max_abs <= atol + rtol * max|ref|; None: not gated
    rtol: float | None
    min_cosine: float
    min_top1: float | None  # classifiers only; None: reported, not gated
    # Top-1 counts the samples whose reference margin exceeds this × max|ref|.
    top1_margin: float = 0.0

    def bound(self, ref_absmax: float) -> float | None:
        if self.atol is None or self.rtol is None:
            return None
        return self.atol + self.rtol * ref_absmax


TOLERANCES = {
    "fp32": Tolerance("fp32", atol=1e-5, rtol=1e-3, min_cosine=0.99999, min_top1=None, top1_margin=1e-4),
    "fp16": Tolerance("fp16", atol=1e-3, rtol=2e-2, min_cosine=0.999, min_top1=None, top1_margin=5e-3),
    "int8": Tolerance("int8", atol=1e-3, rtol=0.5, min_cosine=0.98, min_top1=0.9, top1_margin=0.05),
}
# "best" lets TensorRT pick int8 kernels where it likes: judged as int8.
TOLERANCES["best"] = replace(TOLERANCES["int8"], precision="best")
PRECISIONS = tuple(TOLERANCES)


def tolerance(precision: str, **overrides: float | None) -> Tolerance:
    try:
        tol = TOLERANCES[precision]
    except KeyError:
        raise UserError(f"unknown precision {precision!r}; choose from {', '.join(TOLERANCES)}") from None
    given = {k: v for k, v in overrides.items() if v is not None}
    for name, value in given.items():
        if value < 0 or (name in ("min_cosine", "min_top1") and value > 1):
            raise UserError(f"--{name.replace('_', '-')} {value}: out of range")
    return replace(tol, **given)


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
    top1_judged: int | None = None  # samples whose margin let top-1 be judged
    top1_samples: int | None = None
    input_independent: bool = False  # the reference is the same for every input


@dataclass
class Verdict:
    ok: bool
    precision: str
    tolerance: dict[str, Any]
    batch_sizes: list[int]
    seed: int
    outputs: list[OutputVerdict]
    message: str
    judged: bool = True  # False: the reference cannot tell right from wrong

    @property
    def worst(self) -> OutputVerdict | None:
        failing = [o for o in self.outputs if not o.ok] or self.outputs
        return max(failing, key=lambda o: (not o.ok, o.max_rel)) if failing else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "precision": self.precision,
            "tolerance": self.tolerance,
            "batch_sizes": self.batch_sizes,
            "seed": self.seed,
            "message": self.message,
            "judged": self.judged,
            "outputs": {o.name: asdict(o) for o in self.outputs},
        }


def _cosines(ref: np.ndarray, cand: np.ndarray) -> np.ndarray:
    r = ref.reshape(ref.shape[0], -1).astype(np.float64)
    c = cand.reshape(cand.shape[0], -1).astype(np.float64)
    num = (r * c).sum(axis=1)
    den = np.linalg.norm(r, axis=1) * np.linalg.norm(c, axis=1)
    both_zero = (den == 0) & (np.abs(r).max(axis=1, initial=0) == 0) & (np.abs(c).max(axis=1, initial=0) == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)
    return np.where(both_zero, 1.0, cos)


def compare(
    reference: Sequence[dict[str, np.ndarray]],
    candidate: Sequence[dict[str, np.ndarray]],
    tol: Tolerance,
    batch_sizes: Sequence[int],
    seed: int = VERIFY_SEED,
    model: str | None = None,
) -> Verdict:
    """Compare per-batch outputs (one dict per batch size, same order) against ``tol``.
    ``model``: the zoo name the artifacts carry, whose objective says whether a
    (batch, N) output holds class scores (top-1 is read) or not (Mask R-CNN's heads)."""
    if len(reference) != len(candidate) or len(reference) != len(batch_sizes):
        raise ValueError("reference, candidate and batch_sizes differ in length")
    ref_names = list(reference[0])
    cand_names = list(candidate[0])
    if len(ref_names) != len(cand_names):
        return _mismatch(
            tol,
            batch_sizes,
            seed,
            f"the reference has {len(ref_names)} outputs, the candidate "
            f"{len(cand_names)} ({', '.join(cand_names)})",
        )
    # Outputs pair by name when the names agree, else by position (exporters rename).
    pairs = (
        [(n, n) for n in ref_names] if set(ref_names) == set(cand_names) else list(zip(ref_names, cand_names))
    )
    objective = _objective(model)
    verdicts = []
    for ref_name, cand_name in pairs:
        verdicts.append(
            _compare_output(
                cand_name,
                [r[ref_name] for r in reference],
                [c[cand_name] for c in candidate],
                tol,
                batch_sizes,
                objective,
            )
        )
    # One constant output (SSD's anchors) is by design; all of them is a dead reference.
    judged = not (verdicts and sum(batch_sizes) > 1 and all(v.input_independent for v in verdicts))
    ok = judged and all(v.ok for v in verdicts)
    verdict = Verdict(
        ok=ok,
        judged=judged,
        precision=tol.precision,
        tolerance=asdict(tol),
        batch_sizes=list(batch_sizes),
        seed=seed,
        outputs=verdicts,
        message="",
    )
    verdict.message = _message(verdict)
    return verdict


def _objective(model: str | None) -> str | None:
    """A zoo model's objective (None for a user's model: its output's shape decides)."""
    from dlbench.models.registry import get_model, list_models

    return get_model(model).objective if model and model in list_models() else None


def _mismatch(tol, batch_sizes, seed, why: str) -> Verdict:
    return Verdict(
        ok=False,
        precision=tol.precision,
        tolerance=asdict(tol),
        batch_sizes=list(batch_sizes),
        seed=seed,
        outputs=[],
        message=why,
    )


def _compare_output(
    name: str,
    refs: list[np.ndarray],
    cands: list[np.ndarray],
    tol: Tolerance,
    batch_sizes: Sequence[int],
    objective: str | None = None,
) -> OutputVerdict:
    failures = []
    for b, r, c in zip(batch_sizes, refs, cands):
        r, c = np.asarray(r), np.asarray(c)
        if r.shape != c.shape:
            return OutputVerdict(
                name,
                False,
                list(c.shape),
                math.inf,
                math.inf,
                math.inf,
                0.0,
                0.0,
                failures=[f"at batch {b} the shape is {list(c.shape)}, the reference's {list(r.shape)}"],
            )
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
    top1 = judged = samples = None
    ref_scores = class_scores(ref, objective)
    cand_scores = class_scores(np.nan_to_num(cand), objective)
    if ref_scores is not None and ref_scores.shape[1] > 1:
        top2 = np.sort(ref_scores, axis=1)[:, -2:]
        clear = (top2[:, 1] - top2[:, 0]) > tol.top1_margin * ref_absmax
        samples, judged = int(len(clear)), int(clear.sum())
        if judged:
            agree = ref_scores.argmax(axis=1) == cand_scores.argmax(axis=1)
            top1 = float(agree[clear].mean())
    spread = np.ptp(ref, axis=0) if ref.shape[0] > 1 else None
    input_independent = spread is not None and bool(spread.max(initial=0.0) <= 1e-6 * max(ref_absmax, 1e-30))
    bound = tol.bound(ref_absmax)
    if bound is not None and max_abs > bound:
        failures.append(
            f"max abs diff {max_abs:.3g} > {tol.atol:g} + {tol.rtol:g} × {ref_absmax:.3g} = {bound:.3g}"
        )
    if cosine < tol.min_cosine:
        worst_sample = int(np.argmin(cosines))
        wb, wo = _locate(worst_sample, batch_sizes)
        failures.append(f"cosine {cosine:.6f} < {tol.min_cosine:g} (batch {wb}, sample {wo})")
    if tol.min_top1 is not None and top1 is not None and top1 < tol.min_top1:
        failures.append(f"top-1 agreement {top1:.1%} < {tol.min_top1:.0%}")
    worst = {
        "batch_size": batch_of,
        "sample": offset,
        "index": [int(i) for i in index],
        "reference": float(ref.flat[flat]) if ref.size else None,
        "candidate": float(cand.flat[flat]) if cand.size else None,
    }
    return OutputVerdict(
        name,
        not failures,
        shape,
        max_abs,
        max_rel,
        mean_abs,
        cosine,
        ref_absmax,
        top1,
        bound,
        worst,
        failures,
        judged,
        samples,
        input_independent,
    )


def _locate(sample: int, batch_sizes: Sequence[int]) -> tuple[int, int]:
    """Which batch (by size) and which sample in it a concatenated row index is."""
    for b in batch_sizes:
        if sample < b:
            return b, sample
        sample -= b
    return batch_sizes[-1], sample


def _message(v: Verdict) -> str:
    if not v.judged:
        return (
            "cannot judge: the reference's outputs are the same for every input (a random-weight "
            "network whose head saturates?), so no candidate can be told right or wrong; verify "
            "with trained weights (--weights) or inputs it separates (--input)"
        )
    if v.ok:
        worst = v.worst
        extra = (
            f", top-1 {worst.top1:.0%} of {worst.top1_judged} clear samples"
            if worst and worst.top1 is not None
            else ""
        )
        return (
            f"within {v.precision} tolerance at batch sizes "
            f"{','.join(map(str, v.batch_sizes))} (worst output {worst.name}: max abs "
            f"{worst.max_abs:.3g}, cosine {worst.cosine:.6f}{extra})"
            if worst
            else "no outputs"
        )
    w = v.worst
    if w is None:
        return v.message or "no outputs to compare"
    where = w.worst
    loc = (
        f" at batch {where['batch_size']}, sample {where['sample']}, index "
        f"{where['index']} (reference {where['reference']:.6g}, candidate "
        f"{where['candidate']:.6g})"
        if where and where.get("reference") is not None
        else ""
    )
    return f"output {w.name} over {v.precision} tolerance: {'; '.join(w.failures)}{loc}"
