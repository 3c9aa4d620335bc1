"""The model zoo: one registry, thin registered entry points (timm's idea).

A ``ModelSpec`` describes a network independently of any framework: its input,
its classes, how to build it in each framework (as ``"module:function"``
strings, so nothing is imported until a framework actually builds it), and its
analytic cost.  Registering a model is adding a file under ``models/`` that
calls ``register_model``; tests are parametrized over ``list_models()``.
"""

from __future__ import annotations

import fnmatch
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dlbench.core.errors import UserError


@dataclass(frozen=True)
class InputSpec:
    name: str
    shape: tuple[int, ...]  # per sample, channels-first for images
    dtype: str = "float32"
    # Largest integer value + 1 for token inputs (an embedding's table size).
    int_range: tuple[int, int] | None = None


# Training objective -> the ``head`` its builder is called with (None: the
# default classification network).  Each framework computes the objective's
# loss with the function ``harness.training.objectives`` names for it.
OBJECTIVES: dict[str, str | None] = {
    "classification": None,  # cross-entropy on the logits
    "bert-pretraining": "pretraining",  # masked-LM (labels != -100) + next-sentence
    "regression": None,  # mean squared error on the output (a user's model)
    "ctr": None,  # click-through rate: 2-logit cross-entropy, scored by AUC
    "ctc": None,  # CTC on per-frame character logits (DeepSpeech2)
    "seq2seq": None,  # per-position cross-entropy, padding (id 0) ignored
    "detection": None,  # SSD's multibox loss on the raw heads (models.ssd)
    "instance-segmentation": None,  # Mask R-CNN: RPN, box and mask losses on given boxes
}
# Objective -> "module:function(framework, spec, trained)" that turns the
# trained network into the inference (classification) one.  A checkpoint holds
# what training built, while export and bench run the builder's default
# network; objectives whose head is the default need no entry.
INFERENCE_FROM_TRAINING: dict[str, str] = {
    "bert-pretraining": "dlbench.models.bert:classification_from_pretraining",
}
# Objective -> "module:function(spec, batch_size, n_batches, seed)" giving its synthetic
# training batches, for objectives whose data is not a classifier's (models.synthetic).
# Named, not imported: the family's data module builds on models.synthetic itself.
SYNTHETIC_DATA: dict[str, str] = {
    "bert-pretraining": "dlbench.models.bert.data:bert_pretraining_batches",
    "ctr": "dlbench.models.din.data:ctr_batches",
    "ctc": "dlbench.models.deepspeech2.data:ctc_batches",
    "seq2seq": "dlbench.models.gnmt.data:seq2seq_batches",
    "detection": "dlbench.models.ssd.data:detection_batches",
    "instance-segmentation": "dlbench.models.maskrcnn.data:instance_batches",
}


# The family of a spec made from a user's model's signature (harness.training.user), not
# registered: its data follows the signature (harness.data.signature).
USER_FAMILY = "user"


def resolve_entry(target: str) -> Callable[..., Any]:
    """A registry entry point ``"module:function"``, imported on first use."""
    module, _, func = target.partition(":")
    return getattr(importlib.import_module(module), func)


@dataclass(frozen=True)
class RunDefaults:
    """What ``dlbench run MODEL`` and ``scripts/<family>.sh`` do when not told
    otherwise: written once here, so the run, its ``--print-steps`` and the
    generated scripts cannot disagree.  A brief run by default (minutes on 2 CPU
    cores); a model whose results need more says so in its spec."""

    train_steps: int = 6
    warmup_steps: int = 2
    batch_sizes: tuple[int, ...] = (1, 8, 32)  # inference
    precisions: tuple[str, ...] = ("fp32", "fp16", "int8")
    frameworks: tuple[str, ...] | None = None  # None: every framework it has
    # "static" (calibrated QDQ), "dynamic" (weights only, activations scaled at run time)
    # or "auto" (the build reads the graph: dynamic for attention and recurrent layers,
    # converters.int8_recipe.choose_mode).  Static QDQ of a recurrent or token network
    # either cannot be built (MindSpore's opset-11 LSTM) or calibrates on ids.
    int8_mode: str = "auto"
    # Static INT8 of only these op types (build --quantize-op-types); None: every type the
    # quantizer handles.
    int8_op_types: tuple[str, ...] | None = None
    calib_data: str | None = None  # build --calib-data (None: synthetic)
    train_data: str = "synthetic"  # train --data
    eval: bool = False  # train --eval (held-out score)
    learning_rate: float | None = None  # None: the spec's default_lr


@dataclass(frozen=True)
class ModelSpec:
    name: str
    display_name: str
    family: str
    task: str
    network_type: str  # the seeds' "Network Type" column: CNN, RNN, Attention
    dataset: str  # what the real network trains on (synthetic stands in)
    inputs: tuple[InputSpec, ...]
    num_classes: int
    default_batch_size: int
    builders: dict[str, str]  # framework -> "module:function"
    config: dict[str, Any] = field(default_factory=dict)
    macs_fn: Callable[[ModelSpec], int] | None = None
    params_fn: Callable[[ModelSpec], int] | None = None
    # What training minimizes (see OBJECTIVES); export and bench always use the
    # builder's default (classification) network.
    objective: str = "classification"
    run: RunDefaults = field(default_factory=RunDefaults)

    @property
    def token_inputs(self) -> bool:
        """True when the inputs are integer ids (text), not float tensors (images)."""
        return any(i.dtype.startswith("int") for i in self.inputs)

    def build_for_training(self, framework: str, **overrides):
        """The network the objective trains: the builder with the objective's head."""
        head = OBJECTIVES[self.objective]
        return self.build(framework, **({"head": head} if head else {}), **overrides)

    def inference_from_training(self, framework: str, trained):
        """The inference network carrying ``trained``'s weights (``trained`` itself
        when the objective trains the inference network)."""
        target = INFERENCE_FROM_TRAINING.get(self.objective)
        if target is None:
            return trained
        return resolve_entry(target)(framework, self, trained)

    @property
    def frameworks(self) -> tuple[str, ...]:
        return tuple(self.builders)

    @property
    def default_lr(self) -> float:
        """SGD learning rate when none is given: one rate cannot show every network
        learning in a few steps (an LSTM stays flat at the CNNs' 0.05)."""
        return float(self.config.get("learning_rate", 0.05))

    @property
    def int8_mode(self) -> str:
        """How ``dlbench run`` quantizes to INT8 (see ``RunDefaults.int8_mode``)."""
        return self.run.int8_mode

    @property
    def run_frameworks(self) -> tuple[str, ...]:
        return self.run.frameworks or self.frameworks

    @property
    def macs_per_sample(self) -> int | None:
        return self.macs_fn(self) if self.macs_fn else None

    @property
    def gflops_per_sample(self) -> float | None:
        """Forward FLOPs per sample, counting one multiply-add as two FLOPs."""
        macs = self.macs_per_sample
        return None if macs is None else 2 * macs / 1e9

    @property
    def parameter_count(self) -> int | None:
        return self.params_fn(self) if self.params_fn else None

    def config_with(self, overrides: dict[str, Any]) -> dict[str, Any]:
        """The spec's config with a builder's overrides; an unknown key is a typo to
        report, not a new knob to ignore silently."""
        unknown = set(overrides) - set(self.config)
        if unknown:
            raise TypeError(f"unknown {self.family} config keys: {', '.join(sorted(unknown))}")
        return {**self.config, **overrides}

    def builder(self, framework: str) -> Callable[..., Any]:
        try:
            target = self.builders[framework]
        except KeyError:
            raise UserError(
                f"model {self.name!r} has no {framework} implementation; it has: {', '.join(self.builders)}"
            ) from None
        return resolve_entry(target)

    def build(self, framework: str, **overrides):
        """Build the native network for ``framework`` (imports that framework)."""
        return self.builder(framework)(self, **overrides)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "display_name": self.display_name,
            "task": self.task,
            "network_type": self.network_type,
            "inputs": [
                {
                    "name": i.name,
                    "shape": list(i.shape),
                    "dtype": i.dtype,
                    **({"int_range": list(i.int_range)} if i.int_range else {}),
                }
                for i in self.inputs
            ],
            "num_classes": self.num_classes,
            "objective": self.objective,
            "default_batch_size": self.default_batch_size,
            "frameworks": list(self.frameworks),
            "parameters": self.parameter_count,
            "gflops_per_sample": self.gflops_per_sample,
            "config": dict(self.config),
        }


_REGISTRY: dict[str, ModelSpec] = {}
_LOADED = False

# Modules whose import registers models.  Adding a family = adding it here.
_FAMILIES = (
    "dlbench.models.resnet",
    "dlbench.models.googlenet",
    "dlbench.models.lstm",
    "dlbench.models.bert",
    "dlbench.models.lenet",
    "dlbench.models.vgg",
    "dlbench.models.densenet",
    "dlbench.models.din",
    "dlbench.models.deepspeech2",
    "dlbench.models.gnmt",
    "dlbench.models.ssd",
    "dlbench.models.maskrcnn",
)


def register_model(spec: ModelSpec) -> ModelSpec:
    if spec.name in _REGISTRY:
        raise ValueError(f"model {spec.name!r} registered twice")
    _REGISTRY[spec.name] = spec
    return spec


def _load() -> None:
    global _LOADED
    if not _LOADED:
        _LOADED = True
        for mod in _FAMILIES:
            importlib.import_module(mod)


def list_models(pattern: str = "*") -> list[str]:
    _load()
    return sorted(n for n in _REGISTRY if fnmatch.fnmatch(n, pattern))


def get_model(name: str) -> ModelSpec:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        what = (
            f"{name}: no such file or directory, and not a zoo model"
            if "/" in name or "." in name
            else f"unknown model {name!r}"
        )
        raise UserError(f"{what}; known models: {', '.join(list_models())}") from None
