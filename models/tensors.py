"""The one description of a tensor a model takes or gives, shared by every layer.

ONNX graphs, engines, native networks and the synthesizers of inputs all
speak of inputs and outputs this way, so a shape read from a file can be
handed to any runner or generator without translation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TensorInfo:
    """An input or output as the model declares it.

    ``shape`` holds ints for fixed dimensions, a string for a named (symbolic)
    dimension — the same name binds together wherever it appears — and None
    for an anonymous one, which is an unknown of its own.
    """
    name: str
    dtype: str                # numpy dtype name
    shape: tuple[Any, ...]
