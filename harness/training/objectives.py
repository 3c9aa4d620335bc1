"""What a training step minimizes, by name, with one small loss per framework.

``ModelSpec.objective`` names the objective; its declaration in ``OBJECTIVES``
names, per framework, the function that computes its loss (imported only
inside the training process, where that framework is loaded), its label
arrays and their dtype.  These were three hand-kept tables and a lookup; one
declaration each keeps them together, and ``--objective`` lists its choices
from it.  A new objective is one declaration here (or in a plugin), one head in
the model's builders (``models.registry.OBJECTIVES``, which the model layer
keeps: it cannot import this one) and one short function per framework.

The loss contracts:

* PyTorch and TensorFlow: ``loss(outputs, labels) -> scalar tensor`` where
  ``outputs`` is what the training network returns and ``labels`` one tensor
  or a tuple of tensors in ``Objective.labels`` order (PyTorch: int64; TensorFlow:
  int32; float32 for regression, ``Objective.label_dtype``);
* MindSpore: an ``nn.Cell`` class whose ``construct(outputs, *labels)``
  returns the scalar loss (int32 labels), compiled with the network.

Classification losses read classes on the last axis and flatten the rest:
``(batch, classes)`` logits take ``(batch,)`` labels, and a user's per-position
output ``(batch, steps, classes)`` takes ``(batch, steps)``.  ``seq2seq`` (translation
with teacher forcing) is that per-position cross-entropy with padded target
positions (id 0) left out of the mean: classification would count them, and a batch
of short sentences would mostly learn to predict padding.

Batches come as ``(inputs, labels)``: inputs one array (images), a tuple in
``spec.inputs`` order, or a dict by input name (``harness.data`` token
readers); labels one array, a tuple in ``Objective.labels`` order, or a dict with those
names.  ``inputs_of`` and ``labels_of`` turn any of them into tuples.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from dlbench.core.errors import UserError
from dlbench.core.frameworks import NAMES
from dlbench.core.registry import Registry
from dlbench.models.registry import ModelSpec

FRAMEWORKS = NAMES


@dataclass(frozen=True)
class Objective:
    """One training objective.  ``losses`` are ``"module:attribute"`` strings so that
    naming them imports no framework; ``labels`` None means one label array."""

    name: str
    description: str  # one line, for --help
    losses: dict[str, str] = field(hash=False)  # framework -> loss (see above)
    labels: tuple[str, ...] | None = None  # the label arrays, in loss order
    # The labels' numpy dtype where they are not class indices (None: the framework's
    # own class-index type, int64 or int32).
    label_dtype: str | None = None
    # A model of your own may name it with --objective (its labels: class indices for
    # classification, else the output's own shape, as harness.training.user makes them).
    user: bool = False


OBJECTIVES: Registry[Objective] = Registry("objective")


def _declare(name: str, description: str, losses: dict[str, str], **kw: Any) -> None:
    OBJECTIVES.register(name, Objective(name, description, losses, **kw))


def _family(package: str, function: str, cell: str) -> dict[str, str]:
    """A model family's losses: ``function`` in its torch and keras modules, ``cell`` in
    its mindspore module."""
    return {
        "pytorch": f"{package}.torch:{function}",
        "tensorflow": f"{package}.keras:{function}",
        "mindspore": f"{package}.mindspore:{cell}",
    }


def _ours(function: str, cell: str) -> dict[str, str]:
    """Losses of harness.training's own session modules."""
    return {
        fw: f"dlbench.harness.training.{fw}:{cell if fw == 'mindspore' else function}" for fw in FRAMEWORKS
    }


_declare(
    "classification",
    "class scores on the output's last axis, cross-entropy",
    _ours("classification_loss", "ClassificationLoss"),
    user=True,
)
_declare(
    "bert-pretraining",
    "BERT's masked-LM (labels != -100) plus next-sentence loss",
    _family("dlbench.models.bert", "pretraining_loss", "PretrainingLoss"),
    labels=("mlm_labels", "nsp_labels"),
)
_declare(
    "seq2seq",
    "per-position cross-entropy, padding (id 0) left out (GNMT)",
    _family("dlbench.models.gnmt", "seq2seq_loss", "Seq2SeqLoss"),
)
# Detection's class targets travel as float32 beside its box targets (one dtype per
# objective); its losses cast them back to integers.
_declare(
    "detection",
    "SSD's multibox loss on the raw heads",
    _family("dlbench.models.ssd", "detection_loss", "DetectionLoss"),
    labels=("class_targets", "box_targets"),
    label_dtype="float32",
)
# Mask R-CNN: the five losses of ``models.maskrcnn.reference`` on the raw heads, the
# boxes and their targets made before the clock (``models.maskrcnn.boxes``).  Its
# anchor, RoI and mask-box labels travel as float32 beside the deltas, as detection's.
_declare(
    "instance-segmentation",
    "Mask R-CNN's RPN, box and mask losses on given boxes",
    _family("dlbench.models.maskrcnn", "instance_segmentation_loss", "InstanceSegmentationLoss"),
    labels=("rpn_labels", "rpn_targets", "roi_labels", "roi_targets", "mask_classes", "mask_targets"),
    label_dtype="float32",
)
_declare(
    "regression",
    "values: mean squared error on the output",
    _ours("regression_loss", "RegressionLoss"),
    label_dtype="float32",
    user=True,
)
# Click-through rate (DIN): the network gives 2 logits (no click, click), and
# softmax cross-entropy over two logits IS binary cross-entropy on their
# difference, so the classification losses are the CTR losses; the objective
# differs in its held-out score (AUC, harness.evaluate.scoring).
_declare(
    "ctr",
    "click-through rate: 2-logit cross-entropy, scored by AUC",
    _ours("classification_loss", "ClassificationLoss"),
)
# Padded transcripts, their lengths, and each utterance's frames after the conv strides.
_declare(
    "ctc",
    "CTC on per-frame character logits (DeepSpeech2)",
    _family("dlbench.models.deepspeech2", "ctc_loss", "CTCLoss"),
    labels=("transcripts", "transcript_lengths", "output_frames"),
)


def user_objectives() -> tuple[str, ...]:
    """What ``--objective`` accepts for a model of your own."""
    return tuple(o.name for o in OBJECTIVES.all() if o.user)


def __getattr__(name: str) -> Any:
    """``LOSSES`` and ``LABELS``, the tables this registry replaced, still readable by
    code (and tests) written against them: copies built on each use, so a plugin's
    objectives show and nothing can be declared by editing them."""
    if name == "LOSSES":
        return {o.name: dict(o.losses) for o in OBJECTIVES.all(hidden=True)}
    if name == "LABELS":
        return {o.name: o.labels for o in OBJECTIVES.all(hidden=True)}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def label_dtype(objective: str, integer: str) -> str:
    """What a framework's loss takes as labels for ``objective``: ``integer`` (the
    framework's class-index type) unless the objective's labels are values."""
    return OBJECTIVES.get(objective).label_dtype or integer


def loss_for(objective: str, framework: str) -> Any:
    """The loss function (or MindSpore Cell class) for ``objective`` in ``framework``."""
    target = OBJECTIVES.get(objective).losses.get(framework)
    if target is None:
        raise UserError(f"objective {objective!r} has no {framework} loss")
    module, _, name = target.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"objective {objective!r}: {target} is missing ({exc})") from None


def inputs_of(spec: ModelSpec, inputs: Any) -> tuple:
    """A batch's inputs as a tuple in ``spec.inputs`` order."""
    if isinstance(inputs, dict):
        try:
            return tuple(inputs[i.name] for i in spec.inputs)
        except KeyError as exc:
            raise ValueError(
                f"{spec.name}: the batch has no input {exc}; it has {', '.join(inputs)}"
            ) from None
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs)
    return (inputs,)


def labels_of(spec: ModelSpec, labels: Any) -> Any:
    """One array, or a tuple in the objective's ``labels`` order."""
    names = OBJECTIVES.get(spec.objective).labels
    if isinstance(labels, dict):
        if names is None:
            raise ValueError(f"{spec.name}: objective {spec.objective!r} takes one label array")
        return tuple(labels[n] for n in names)
    if isinstance(labels, list):
        return tuple(labels)
    return labels
