"""Synthetic data that a network can actually learn.

Uniform noise with random labels measures speed but can never show that the
training step works (the loss cannot fall below chance).  Here every class has
a fixed low-resolution pattern, upsampled to the input size, and a sample is
its class's pattern plus noise: the label is a function of the image, so the
loss of a correct training loop falls within a few steps.  Labels are drawn
from at most ``ACTIVE_CLASSES`` classes: a thousand-class network sees each
class about once in a short run and cannot show learning, while with a few
active classes its loss falls from ln(classes) within a handful of steps.
Label values cost nothing at run time, so the timings are unaffected.  One
seed drives everything; the same seed gives the same bytes.

Token models get the same treatment (``token_batches``: each class has its
own words); BERT pre-training batches come from
``models.bert.data.bert_pretraining_batches`` (a Zipf-weighted Markov corpus,
masked as BERT does), SSD's detection batches from ``models.ssd.data`` (image
objectives also take the layout); ``batches`` picks by objective and input type.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlbench.models.registry import SYNTHETIC_DATA, ModelSpec, resolve_entry

PATTERN_RES = 8  # side of the per-class pattern before upsampling
NOISE = 0.5
ACTIVE_CLASSES = 16
# Cap the memory the pre-generated pool may take; batches are cycled.
POOL_BYTES = 512 * 2**20
MAX_POOL_BATCHES = 8


def pool_size(spec: ModelSpec, batch_size: int, wanted: int) -> int:
    """How many distinct batches to pre-generate (at least 1)."""
    sample_bytes = sum(int(np.prod(i.shape)) * np.dtype(i.dtype).itemsize for i in spec.inputs)
    fit = max(1, POOL_BYTES // max(1, sample_bytes * batch_size))
    return int(max(1, min(wanted, MAX_POOL_BATCHES, fit)))


def image_batches(
    spec: ModelSpec, batch_size: int, n_batches: int, seed: int = 0, layout: str = "NCHW"
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n_batches`` (images float32, labels int32) pairs, in ``layout`` (NCHW or NHWC)."""
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"layout must be NCHW or NHWC, not {layout}")
    channels, height, width = spec.inputs[0].shape
    rng = np.random.default_rng(seed)
    patterns = rng.standard_normal((spec.num_classes, channels, PATTERN_RES, PATTERN_RES)).astype(np.float32)
    reps_h, reps_w = -(-height // PATTERN_RES), -(-width // PATTERN_RES)
    out = []
    for _ in range(n_batches):
        labels = rng.integers(0, min(spec.num_classes, ACTIVE_CLASSES), size=batch_size).astype(np.int32)
        base = patterns[labels].repeat(reps_h, axis=2).repeat(reps_w, axis=3)[:, :, :height, :width]
        images = base + NOISE * rng.standard_normal(base.shape, dtype=np.float32)
        if layout == "NHWC":
            images = images.transpose(0, 2, 3, 1)
        out.append((np.ascontiguousarray(images, dtype=np.float32), labels))
    return out


# --- token inputs ---------------------------------------------------------------------------
#
# A batch is ``(inputs, labels)`` with ``inputs`` a tuple of arrays in
# ``spec.inputs`` order (one array per input, even for one input) and
# ``labels`` one int32 array (classification) or a tuple (multi-objective).
# Special ids follow ``harness.data``'s vocabulary: [PAD] 0, [UNK] 1, [CLS] 2,
# [SEP] 3, [MASK] 4 (a spec may override them in ``config``: pad_id, cls_id,
# sep_id, mask_id); synthetic words use the ids above them.

SIGNAL = 0.8  # share of a sample's tokens drawn from its class's own words
CLASS_WORDS = 8  # words per class
SPECIAL_IDS = {"pad_id": 0, "unk_id": 1, "cls_id": 2, "sep_id": 3, "mask_id": 4}


def specials(spec: ModelSpec) -> dict[str, int]:
    return {k: int(spec.config.get(k, v)) for k, v in SPECIAL_IDS.items()}


def _role(inp) -> str:
    """What a token model's input carries: ids, segment (token type) ids or a mask."""
    name = inp.name.lower()
    if "mask" in name:
        return "mask"
    if "type" in name or "segment" in name or tuple(inp.int_range or ()) == (0, 2):
        return "segment"
    return "ids"


def _vocab(spec: ModelSpec) -> tuple[int, int]:
    """[first word id, vocabulary size) of the ids input."""
    ids = next(i for i in spec.inputs if _role(i) == "ids")
    if ids.int_range is None:
        raise ValueError(f"{spec.name}: token input {ids.name!r} has no int_range")
    first = max(specials(spec).values()) + 1
    lo, hi = ids.int_range
    first = max(first, lo)
    if hi - first < 2:
        raise ValueError(f"{spec.name}: vocabulary {ids.int_range} is too small")
    return first, hi


def _pack(
    spec: ModelSpec, ids: np.ndarray, segments: np.ndarray | None = None, mask: np.ndarray | None = None
) -> tuple[np.ndarray, ...]:
    """The arrays in ``spec.inputs`` order, each in its input's dtype."""
    out = []
    for inp in spec.inputs:
        role = _role(inp)
        value = {
            "ids": ids,
            "segment": segments if segments is not None else np.zeros_like(ids),
            "mask": mask if mask is not None else np.ones_like(ids),
        }[role]
        out.append(np.ascontiguousarray(value, dtype=inp.dtype))
    return tuple(out)


def token_batches(
    spec: ModelSpec, batch_size: int, n_batches: int, seed: int = 0
) -> list[tuple[tuple[np.ndarray, ...], np.ndarray]]:
    """Text classification: each class has its own few words, and ``SIGNAL`` of a
    sample's tokens are its class's words (the rest uniform over the vocabulary),
    spread over every position, so any sequence model can learn the label; with
    at most ``ACTIVE_CLASSES`` classes, as for images."""
    seq = spec.inputs[0].shape[0]
    first, vocab = _vocab(spec)
    rng = np.random.default_rng(seed)
    classes = min(spec.num_classes, ACTIVE_CLASSES)
    per_class = max(1, min(CLASS_WORDS, (vocab - first) // classes))
    if classes * per_class <= vocab - first:  # disjoint word sets
        words = first + rng.permutation(vocab - first)[: classes * per_class]
    else:
        words = rng.integers(first, vocab, size=classes * per_class)
    words = words.reshape(classes, per_class)
    out = []
    for _ in range(n_batches):
        labels = rng.integers(0, classes, size=batch_size).astype(np.int32)
        ids = rng.integers(first, vocab, size=(batch_size, seq))
        signal = rng.random((batch_size, seq)) < SIGNAL
        picks = words[labels[:, None], rng.integers(0, words.shape[1], size=(batch_size, seq))]
        ids = np.where(signal, picks, ids)
        out.append((_pack(spec, ids), labels))
    return out


def batches(
    spec: ModelSpec, batch_size: int, n_batches: int, seed: int = 0, layout: str = "NCHW"
) -> list[tuple[Any, Any]]:
    """Training batches for any zoo model: by objective, then by input type.

    Images keep ``image_batches``' (array, labels) pairs (``layout`` applies to
    them only); token models get a tuple of input arrays.
    """
    if spec.objective in SYNTHETIC_DATA:
        out = resolve_entry(SYNTHETIC_DATA[spec.objective])(spec, batch_size, n_batches, seed)
        return [(_in_layout(x, layout), y) for x, y in out]
    if spec.objective != "classification":
        raise ValueError(f"{spec.name}: no synthetic data for objective {spec.objective!r}")
    if spec.token_inputs:
        return token_batches(spec, batch_size, n_batches, seed)
    return image_batches(spec, batch_size, n_batches, seed, layout)


def _in_layout(x: Any, layout: str) -> Any:
    """An objective's batch inputs with its NCHW float arrays (DeepSpeech2's spectrograms)
    in ``layout``; token ids and other arrays as they are."""
    if layout == "NCHW":
        return x
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if x.ndim == 4 and x.dtype.kind == "f" else x
    return type(x)(_in_layout(a, layout) for a in x)


# Objectives whose inference inputs only their own synthetic data can make: DIN's four id
# inputs differ in shape and range, which ``token_batches`` does not know; Mask R-CNN's
# box inputs must be boxes of the image (its sampled RoIs), not noise.
OWN_SAMPLE_INPUTS = ("ctr", "instance-segmentation")
# Objective -> its float inputs that hold pixel corner boxes (x0, y0, x1, y1) of the
# square image input: what a signature-driven synthesizer (``harness.bench.inputs``)
# must fill with valid boxes.
BOX_INPUTS = {"instance-segmentation": ("rois", "mask_rois")}


def box_ranges(spec: ModelSpec) -> dict[str, tuple[int, int]]:
    """``{input: (0, image side)}`` of the spec's box inputs (none for most models)."""
    names = BOX_INPUTS.get(spec.objective, ())
    return {i.name: (0, int(spec.config["image_size"])) for i in spec.inputs if i.name in names}


def sample_inputs(
    spec: ModelSpec, batch_size: int, seed: int = 0, layout: str = "NCHW"
) -> tuple[np.ndarray, ...]:
    """One batch of the classification network's inputs, as a tuple in
    ``spec.inputs`` order (for tests, verification and probes).  An objective
    in ``OWN_SAMPLE_INPUTS`` gives its own synthetic data's inputs (NCHW images).  Others are made
    from ``spec.inputs``, which is what an inference network takes (a greedy decoder
    takes the source alone, where its training data would hold two inputs)."""
    if spec.objective in OWN_SAMPLE_INPUTS:
        ((x, _),) = resolve_entry(SYNTHETIC_DATA[spec.objective])(spec, batch_size, 1, seed)
        return x
    if spec.token_inputs:
        return token_batches(spec, batch_size, 1, seed)[0][0]
    return (image_batches(spec, batch_size, 1, seed, layout)[0][0],)
