"""The native frameworks, declared once for every layer.

Models, converters and the harness each need the list (a checkpoint's framework,
a weight file's, a table's column), and models may not import the harness: the
declaration lives here, in the bottom layer, and imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlbench.core.errors import UserError


@dataclass(frozen=True)
class Framework:
    name: str  # the name users type (--framework)
    module: str  # the top-level import name
    distribution: str  # the PyPI distribution that carries it
    extra: str  # the dlbench extra that installs it
    display: str  # how tables name it
    # Whether a training step is compiled into a graph unless `train --eager` says
    # otherwise: where it is, an eager run's step times are another thing and tables
    # say so; where it is not (PyTorch), --eager changes nothing that runs.
    compiles_steps: bool


FRAMEWORKS: dict[str, Framework] = {
    f.name: f
    for f in (
        Framework("pytorch", "torch", "torch", "pytorch", "PyTorch", compiles_steps=False),
        Framework("tensorflow", "tensorflow", "tensorflow", "tensorflow", "TensorFlow", compiles_steps=True),
        Framework("mindspore", "mindspore", "mindspore", "mindspore", "MindSpore", compiles_steps=True),
    )
}
NAMES: tuple[str, ...] = tuple(FRAMEWORKS)


def get_framework(name: str) -> Framework:
    try:
        return FRAMEWORKS[name]
    except KeyError:
        raise UserError(f"unknown framework {name!r}; choose from: {', '.join(FRAMEWORKS)}") from None
