"""What a ``dlbench train`` asks for: each field a flag sets declares it (``core.flags``).

Apart from the runner so both the CLI and ``dlbench run``'s train stage build one
request without the runner's imports, and so the runner stays about running.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlbench.core.flags import Flag, comma_list, field_of, flag, split
from dlbench.harness.bench.input_args import range_texts, ranges_from
from dlbench.harness.cells import envs
from dlbench.harness.cells.allocator import DEFAULT_ALLOCATOR
from dlbench.harness.store.context import CommandOptions
from dlbench.harness.training import scaling
from dlbench.harness.usermodel import USER_INPUT, USER_SHAPE, model_from_flag, weights_flag
from dlbench.models.user.hub import named


def _data_help() -> str:
    from dlbench.harness.data.formats import help_text

    return help_text()


def _objectives() -> tuple[str, ...]:
    from dlbench.harness.training.objectives import user_objectives

    return user_objectives()


def _objective_help() -> str:
    from dlbench.harness.training.objectives import OBJECTIVES

    return (
        "what a user's model's output is, for its loss: "
        + "; ".join(f"{o.name}: {o.description}" for o in OBJECTIVES.all() if o.user)
        + "; required for a model of your own"
    )


# Graph compiles are most of a one-step run's time (a tiny DenseNet: TensorFlow 16 s
# against 8 s eager, MindSpore 13 s against 4 s): a quick checkpoint to export need not
# pay them.  Recorded in the run's identity, so its times never pass for compiled ones;
# train's flag and run's.
EAGER = Flag(
    ("--eager",),
    switch=True,
    help="run each training step eagerly, with no graph compile: TensorFlow without "
    "tf.function, MindSpore in PyNative mode (PyTorch always runs eagerly); for a quick "
    "checkpoint, not for the compiled network's step times",
)
SCALING = "data-parallel scaling"
LOOPBACK = scaling.LOOPBACK  # the module's name is a field's below


@dataclass
class TrainRequest(CommandOptions):
    """Each field a flag sets declares it (``core.flags``): ``dlbench train``'s parser
    and a ``dlbench run`` train stage's printed step come from here."""

    model: str | None = flag(
        "model",
        default=None,
        help="zoo model name (see 'dlbench models'), a model file of your own "
        f"(TorchScript, .keras, Keras .h5), or {named()}",
    )
    frameworks: list[str] = flag(
        "--framework",
        "-f",
        factory=list,
        many=True,
        read=split,
        write=lambda names: [",".join(names)],
        help="pytorch, tensorflow or mindspore; repeat or comma-separate for several "
        "(default: every framework the model has)",
    )
    # The training setup a printed step always spells, so a script's reader sees it.
    batch_size: int | None = flag(
        "--batch-size", default=None, type=int, spelled_out=True, help="default: the model's own"
    )
    steps: int = flag(
        "--steps", default=10, type=int, spelled_out=True, help="measured steps (default {default})"
    )
    warmup_steps: int = flag(
        "--warmup-steps",
        default=2,
        type=int,
        spelled_out=True,
        help="steps run before the clock starts, reported apart (default {default})",
    )
    device: str = flag(
        "--device", default="cpu", spelled_out=True, help="cpu, gpu or ascend (default {default})"
    )
    precision: str = flag(
        "--precision",
        default="fp32",
        help="fp32 (IEEE float32 on every device), tf32 (NVIDIA GPU of compute capability "
        "8.0+) or amp (default {default})",
    )
    inter_op_threads: int | None = flag("--inter-op-threads", default=None, type=int, help="default 1")
    # The memory allocator of each run's process (harness.cells.allocator: why tuned is the default).
    allocator: str = flag(
        "--allocator",
        default=DEFAULT_ALLOCATOR,
        metavar="NAME",
        help="memory allocator of each run's process: system, tuned (glibc keeping freed "
        "memory), jemalloc or tcmalloc (default {default})",
    )
    # --with PACKAGE==VERSION: a sweep axis; each value's cells run in that cached overlay
    # (harness.cells.envs) instead of the installed package, to time one library against another.
    with_specs: list[str] = field_of(envs.with_flag("training runs"), factory=list)
    data: str = flag("--data", default="synthetic", metavar="DATA", help=_data_help)
    eval: bool = flag(
        "--eval",
        default=False,
        switch=True,
        help="after training, held-out loss and top-1 accuracy in inference mode "
        "(the data set's test/val split; synthetic: a fresh seeded split)",
    )
    eval_samples: int | None = flag(
        "--eval-samples",
        default=None,
        type=int,
        help="evaluate at most this many held-out samples (default: the whole split; synthetic: 256)",
    )
    eager: bool = field_of(EAGER, default=False)
    seed: int = flag("--seed", default=0, type=int)
    learning_rate: float | None = flag(  # None: the model's default_lr
        "--lr",
        default=None,
        type=float,
        help="SGD learning rate, momentum 0.9 (default: the model's own, 0.05 for the CNNs; "
        "see 'dlbench models')",
    )
    extra_context: dict[str, Any] = field(default_factory=dict)
    # A user's own model (harness.training.user): ``model`` a file of its framework, or
    # ``model_from`` code; inputs sized as for bench; ``objective`` says what the loss is.
    model_from: str | None = field_of(model_from_flag("train"), default=None)
    weights: str | None = field_of(weights_flag(), default=None)
    shapes: dict[str, Any] = field_of(USER_SHAPE, factory=dict)
    inputs: dict[str, Any] = field_of(USER_INPUT, factory=dict)
    int_ranges: dict[str, tuple[int, int]] = flag(
        "--int-range",
        factory=dict,
        many=True,
        metavar="NAME=LOW:HIGH",
        read=ranges_from,
        write=range_texts,
        help="a user's model's integer input drawn from [LOW, HIGH)",
    )
    objective: str | None = flag("--objective", default=None, choices=_objectives, help=_objective_help)
    loss_output: str | None = flag(
        "--loss-output",
        default=None,
        metavar="NAME",
        help="the output the loss is on (default: the model's first)",
    )
    # Data-parallel scaling (harness.training.scaling): None trains in one plain process;
    # a list sweeps the devices per node, each cell through the framework's launcher.
    devices: list[int] | None = flag(
        "--devices",
        default=None,
        many=True,
        group=SCALING,
        metavar="N[,N...]",
        read=lambda given: split(given, int),
        write=lambda devices: [",".join(map(str, devices))],
        help="devices per node, a sweep axis (e.g. 1,2,4); on a CPU a device is one process "
        "pinned to its share of the cores",
    )
    scaling: str = flag(
        "--scaling",
        default="weak",
        choices=("weak", "strong"),
        group=SCALING,
        help="weak (default): --batch-size per device, the global batch grows; strong: "
        "--batch-size is the global batch, split over the devices",
    )
    nodes: int = flag(
        "--nodes", default=1, type=int, group=SCALING, help="nodes taking part (default {default})"
    )
    node_rank: int = flag(
        "--node-rank", default=0, type=int, group=SCALING, help="this node's index (default {default})"
    )
    master_addr: str = flag(
        "--master-addr",
        default=LOOPBACK,
        group=SCALING,
        help="node 0's address, which every node names (default {default})",
    )
    master_port: int = flag(
        "--master-port",
        default=0,
        type=int,
        group=SCALING,
        help="node 0's rendezvous port; required with --nodes > 1 (default: a free port per cell)",
    )
    node_addrs: list[str] = flag(
        "--node-addrs",
        factory=list,
        type=comma_list(str),
        group=SCALING,
        metavar="HOST,HOST",
        help="every node's address in node-rank order (TensorFlow on several nodes: TF_CONFIG "
        "names every worker)",
    )
    out: str = flag("--out", default="runs", spelled_out=True, help="checkpoints go to OUT/MODEL/FRAMEWORK/")

    @property
    def user(self) -> bool:
        """A model of the user's own: a zoo name wins over a file of that name."""
        from dlbench.models.registry import list_models
        from dlbench.models.user.hub import parse

        if self.model_from:
            return True
        if self.model is None or self.model in list_models():
            return False
        return Path(self.model).exists() or parse(self.model) is not None
