"""The training axis: what every framework's training session must provide.

A framework module (``harness/training/<framework>.py``) exposes a class
``Session(TrainSession)``.  The shared loop in ``harness.training.loop`` owns
the clock; sessions own only the framework: build the model, place the
pre-generated batches on the device, and run one synchronous optimizer step.
Keeping the clock out of the sessions is what makes the three frameworks'
numbers comparable.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.core.devices import TRAINING
from dlbench.models.registry import ModelSpec

DEVICES = TRAINING
PRECISIONS = ("fp32", "tf32", "amp")  # tf32: float32 in TensorFloat-32 math (harness.cells.mathmode)


@dataclass
class TrainConfig:
    model: str
    framework: str
    batch_size: int
    steps: int
    warmup_steps: int = 2
    device: str = "cpu"
    precision: str = "fp32"
    intra_op_threads: int = 1
    inter_op_threads: int = 1
    data: str = "synthetic"
    seed: int = 0
    learning_rate: float = 0.05
    momentum: float = 0.9
    eval: bool = False  # evaluate on the held-out split after training
    eval_samples: int | None = None  # at most this many held-out samples (None: all)
    eager: bool = False  # no tf.function, MindSpore's PyNative mode (train's --eager)
    # One rank of a data-parallel cell (harness.training.ranks): the session joins its
    # framework's process group and averages gradients over it.
    distributed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class TrainSession(ABC):
    """A model, its optimizer and its data, resident on the device, ready to step.

    ``batches`` are numpy (inputs, int32 labels) pairs already in the layout
    ``layout`` asks for; the constructor must move them to the device so that
    ``step`` measures the framework and not the host.
    """

    framework: str = ""
    layout: str = "NCHW"  # the image layout this framework's model takes
    checkpoint_suffix: str = ""
    rank: int = 0  # this process's place in a data-parallel group
    world_size: int = 1

    def __init__(self, spec: ModelSpec, cfg: TrainConfig, batches: list[tuple[np.ndarray, np.ndarray]]):
        self.spec, self.cfg = spec, cfg

    @staticmethod
    @abstractmethod
    def version() -> str:
        """The framework's version string."""

    @abstractmethod
    def step(self, index: int) -> float:
        """One optimizer step on batch ``index % len(batches)``; return its loss.

        Must not return before the step's work is finished on the device (reading
        the loss as a Python float does that), or the loop would time launches.
        """

    @abstractmethod
    def save(self, directory: Path) -> str:
        """Write the native checkpoint into ``directory``; return its file name."""

    def all_gather(self, row: np.ndarray) -> np.ndarray:
        """Every rank's float64 ``row``, stacked in rank order, on every rank, through the
        framework's own collective (so it also works across nodes); with one rank a
        barrier-free stack of one."""
        if self.world_size == 1:
            return np.asarray(row, np.float64)[None]
        raise NotImplementedError(f"the {self.framework} session cannot train data-parallel")

    def weights_sum(self) -> float:
        """Sum of every trainable weight's magnitude: data-parallel ranks must agree on it
        after training, or their gradients were not averaged (``ranks.combine``)."""
        raise NotImplementedError(f"the {self.framework} session cannot train data-parallel")

    def runtime(self) -> dict[str, Any]:
        """What actually ran: device the framework used, threads it reports."""
        return {}

    def place(self, batch: tuple[Any, Any]) -> tuple[Any, Any]:
        """One host batch as the device tensors ``step`` takes (what the constructor does
        to each batch).  Needed for real data sets, whose batches arrive per step."""
        raise NotImplementedError(f"the {self.framework} session cannot take batches per step")

    def put(self, index: int, batch: tuple[Any, Any]) -> None:
        """Make ``batch`` the one ``step(index)`` trains on; the loop calls this outside
        the timed step and counts it as data time (copying to the device included)."""
        self.batches[index % len(self.batches)] = self.place(batch)

    def evaluate(self, batches: Iterable[tuple[Any, Any]]) -> dict[str, Any]:
        """Held-out loss and accuracy over host ``batches``, in inference mode (batch
        norm on its running statistics, no dropout, no update), scored on the host by
        the objective's tally (``harness.evaluate.scoring``), the same one ``dlbench eval``
        uses on exported models."""
        from dlbench.harness.evaluate.scoring import tally_for
        from dlbench.harness.training.objectives import labels_of

        tally = tally_for(self.spec.objective, self.spec)
        for outputs, labels in self.eval_outputs(batches):
            tally.add(outputs, labels_of(self.spec, labels))
        return tally.result()

    def eval_outputs(self, batches: Iterable[tuple[Any, Any]]):
        """Yield (the network's outputs as a tuple of float numpy arrays, the batch's
        host labels) per batch, in inference mode; restore training mode at the end."""
        raise NotImplementedError(f"the {self.framework} session cannot evaluate")
