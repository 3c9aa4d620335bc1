"""What ``dlbench export`` and ``dlbench build`` ask for.  Each field a flag sets
declares it (``core.flags``): the commands' parsers and a ``dlbench run`` stage's
printed step come from these declarations.  Apart from the conversions themselves
so both stay about converting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dlbench.converters.base import BUILD_TARGETS, BuildOptions, ExportOptions, build_hop
from dlbench.core.flags import comma_list, field_of, flag, nested
from dlbench.harness.bench.input_args import InputFields
from dlbench.harness.store.context import CommandOptions
from dlbench.harness.usermodel import USER_INPUT, USER_SHAPE, model_from_flag, weights_flag
from dlbench.harness.verify.inputs import DEFAULT_BATCH_SIZES, VERIFY_SEED
from dlbench.models.user.hub import named


@dataclass
class ExportRequest(CommandOptions):
    """Each field a flag sets declares it (``core.flags``): ``dlbench export``'s parser
    and a ``dlbench run`` export stage's printed step come from here."""

    sources: list[str] = flag(
        "sources",
        many=True,
        metavar="MODEL",
        help="dlbench train output directory, manifest.json, a bare checkpoint, your own "
        f"model file (TorchScript, .pt2, .keras, .h5, SavedModel), or {named()}",
    )
    framework: str | None = flag(
        "--framework", "-f", default=None, help="framework of a bare checkpoint (default: from its suffix)"
    )
    model: str | None = flag("--model", "-m", default=None, help="zoo model of a bare checkpoint")
    out: str | None = flag(
        "--out", "-o", default=None, help="output file (one checkpoint only; default: model.onnx next to it)"
    )
    # A user's model built by code, its weights, and what sizes a model that does not
    # record its input shapes (--shape, --input): see harness.usermodel.
    model_from: str | None = field_of(model_from_flag("export"), default=None)
    weights: str | None = field_of(weights_flag(), default=None)
    shapes: dict[str, tuple[int, ...]] = field_of(USER_SHAPE, factory=dict)
    inputs: dict[str, Any] = field_of(USER_INPUT, factory=dict)
    # A user's model keeps its own input/output names unless this asks for input/logits.
    canonical_names: bool = flag(
        "--canonical-names",
        default=False,
        switch=True,
        help="name a one-input, one-output model's tensors input/logits, as dlbench's own "
        "exports (default: the model's own names)",
    )
    options: ExportOptions = nested(ExportOptions)
    batch_sizes: tuple[int, ...] = flag(
        "--verify-batch-sizes",
        default=DEFAULT_BATCH_SIZES,
        type=comma_list(int),
        read=tuple,
        help="batch sizes the verifier runs (default {default})",
    )
    seed: int = flag("--seed", default=VERIFY_SEED, type=int, help="seed of the verification inputs")


def _targets() -> tuple[str, ...]:
    return tuple(BUILD_TARGETS.names())  # plugins' targets included: read when the parser is built


def _precisions() -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for t in _targets() for p in build_hop(t).precisions))


@dataclass
class BuildRequest(CommandOptions, InputFields):
    """Each field a flag sets declares it (``core.flags``): ``dlbench build``'s parser and
    a ``dlbench run`` build stage's printed step both come from here."""

    source: str = flag("source", metavar="MODEL.onnx", help="fp32 ONNX model (dlbench export's output)")
    to: str = flag(
        "--to",
        required=True,
        choices=_targets,
        help=lambda: "; ".join(f"{t}: {build_hop(t).summary}" for t in _targets()),
    )
    out: str | None = flag(
        "--out",
        "-o",
        default=None,
        help="output file (default: MODEL.int8.onnx, MODEL.fp16.onnx, MODEL.PRECISION.plan)",
    )
    # tensorrt only; None: the model's own or fp32
    precision: str | None = flag(
        "--precision",
        default=None,
        choices=_precisions,
        help="engine precision (default fp32, or the model's own)",
    )
    options: BuildOptions = nested(BuildOptions)
    verify_batch_sizes: tuple[int, ...] | None = flag(
        "--verify-batch-sizes",
        default=None,
        type=comma_list(int),
        read=tuple,
        help="batch sizes the verifier runs (default 1,8)",
    )
    seed: int = flag("--seed", default=VERIFY_SEED, type=int, help="seed of the verification inputs")
