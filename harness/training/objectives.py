"""What a training step minimizes, by name, with one small loss per framework.

``ModelSpec.objective`` names the objective; this table names, per
framework, the function that computes its loss (imported only inside the
training process, where that framework is loaded).  A new objective is one
row here, one head in the model's builders (``models.registry.OBJECTIVES``)
and one short function per framework.

The loss contracts:

* PyTorch and TensorFlow: ``loss(outputs, labels) -> scalar tensor`` where
  ``outputs`` is what the training network returns and ``labels`` one tensor
  or a tuple of tensors in ``LABELS`` order (PyTorch: int64; TensorFlow: int32;
  float32 for regression, ``LABEL_DTYPES``);
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
readers); labels one array, a tuple in ``LABELS`` order, or a dict with those
names.  ``inputs_of`` and ``labels_of`` turn any of them into tuples.
"""
from __future__ import annotations

import importlib
from typing import Any

from dlbench.core.errors import UserError
from dlbench.models.registry import ModelSpec

LOSSES: dict[str, dict[str, str]] = {
    "classification": {
        "pytorch": "dlbench.harness.training.pytorch:classification_loss",
        "tensorflow": "dlbench.harness.training.tensorflow:classification_loss",
        "mindspore": "dlbench.harness.training.mindspore:ClassificationLoss",
    },
    "bert-pretraining": {
        "pytorch": "dlbench.models.bert.torch:pretraining_loss",
        "tensorflow": "dlbench.models.bert.keras:pretraining_loss",
        "mindspore": "dlbench.models.bert.mindspore:PretrainingLoss",
    },
    "seq2seq": {
        "pytorch": "dlbench.models.gnmt.torch:seq2seq_loss",
        "tensorflow": "dlbench.models.gnmt.keras:seq2seq_loss",
        "mindspore": "dlbench.models.gnmt.mindspore:Seq2SeqLoss",
    },
    "detection": {
        "pytorch": "dlbench.models.ssd.torch:detection_loss",
        "tensorflow": "dlbench.models.ssd.keras:detection_loss",
        "mindspore": "dlbench.models.ssd.mindspore:DetectionLoss",
    },
    # Mask R-CNN: the five losses of ``models.maskrcnn.reference`` on the raw heads, the
    # boxes and their targets made before the clock (``models.maskrcnn.boxes``).
    "instance-segmentation": {
        "pytorch": "dlbench.models.maskrcnn.torch:instance_segmentation_loss",
        "tensorflow": "dlbench.models.maskrcnn.keras:instance_segmentation_loss",
        "mindspore": "dlbench.models.maskrcnn.mindspore:InstanceSegmentationLoss",
    },
    "regression": {
        "pytorch": "dlbench.harness.training.pytorch:regression_loss",
        "tensorflow": "dlbench.harness.training.tensorflow:regression_loss",
        "mindspore": "dlbench.harness.training.mindspore:RegressionLoss",
    },
    # Click-through rate (DIN): the network gives 2 logits (no click, click), and
    # softmax cross-entropy over two logits IS binary cross-entropy on their
    # difference, so the classification losses are the CTR losses; the objective
    # differs in its held-out score (AUC, harness.scoring).
    "ctr": {
        "pytorch": "dlbench.harness.training.pytorch:classification_loss",
        "tensorflow": "dlbench.harness.training.tensorflow:classification_loss",
        "mindspore": "dlbench.harness.training.mindspore:ClassificationLoss",
    },
    "ctc": {
        "pytorch": "dlbench.models.deepspeech2.torch:ctc_loss",
        "tensorflow": "dlbench.models.deepspeech2.keras:ctc_loss",
        "mindspore": "dlbench.models.deepspeech2.mindspore:CTCLoss",
    },
}
# Names of the label arrays, in the order losses receive them (None: one array).
LABELS: dict[str, tuple[str, ...] | None] = {
    "classification": None,
    "bert-pretraining": ("mlm_labels", "nsp_labels"),
    "regression": None,
    "ctr": None,
    # Padded transcripts, their lengths, and each utterance's frames after the conv strides.
    "ctc": ("transcripts", "transcript_lengths", "output_frames"),
    "seq2seq": None,
    "detection": ("class_targets", "box_targets"),
    "instance-segmentation": ("rpn_labels", "rpn_targets", "roi_labels", "roi_targets",
                              "mask_classes", "mask_targets"),
}
# The labels' numpy dtype where they are not class indices (the sessions' int64/int32).
# Detection's class targets travel as float32 beside its box targets (one dtype per
# objective); its losses cast them back to integers.  So do Mask R-CNN's anchor, RoI
# and mask-box labels beside its deltas and mask targets.
LABEL_DTYPES: dict[str, str] = {"regression": "float32", "detection": "float32",
                                "instance-segmentation": "float32"}


def label_dtype(objective: str, integer: str) -> str:
    """What a framework's loss takes as labels for ``objective``: ``integer`` (the
    framework's class-index type) unless the objective's labels are values."""
    return LABEL_DTYPES.get(objective, integer)


def loss_for(objective: str, framework: str) -> Any:
    """The loss function (or MindSpore Cell class) for ``objective`` in ``framework``."""
    try:
        target = LOSSES[objective][framework]
    except KeyError:
        raise UserError(f"objective {objective!r} has no {framework} loss") from None
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
            raise ValueError(f"{spec.name}: the batch has no input {exc}; it has "
                             f"{', '.join(inputs)}") from None
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs)
    return (inputs,)


def labels_of(spec: ModelSpec, labels: Any) -> Any:
    """One array, or a tuple in the objective's ``LABELS`` order."""
    names = LABELS.get(spec.objective)
    if isinstance(labels, dict):
        if names is None:
            raise ValueError(f"{spec.name}: objective {spec.objective!r} takes one label array")
        return tuple(labels[n] for n in names)
    if isinstance(labels, list):
        return tuple(labels)
    return labels
