"""The one description of a tensor a model takes or gives, shared by every layer.

ONNX graphs, engines, native networks and the synthesizers of inputs all
speak of inputs and outputs this way, so a shape read from a file can be
handed to any runner or generator without translation.
"""
from __future__ import annotations

import numbers
import re
from dataclasses import dataclass
from typing import Any

# Exporter placeholders that only say "unknown": "?" (paddle2onnx, and what ONNX
# Runtime prints), "" and an unset dimension (ONNX's own "no value, no param"),
# "None" / "-1" (a Python None or TF's -1 written out as text) and tf2onnx's
# "unk__N" (it mints a fresh one for every unknown dimension, so it never ties two
# dimensions together).  Read as one shared symbol, PP-OCR's [None, 3, ?, ?] would
# force height == width; each is an unknown of its own.  Any other name ("batch",
# "seq", torch's "s0") is a real symbol: the exporter reuses it exactly where the
# sizes must agree.
ANONYMOUS = re.compile(r"\??|none|null|-1|unk__\d+", re.IGNORECASE)


def dimension(d: Any) -> int | str | None:
    """One declared dimension in the project's one reading: a fixed int, a symbol
    name that binds wherever it recurs, or None for an anonymous unknown."""
    if d is None or isinstance(d, bool):
        return None
    if isinstance(d, numbers.Integral):
        return int(d) if d >= 0 else None     # TensorRT's and NumPy's -1: unknown
    text = str(d)
    return None if ANONYMOUS.fullmatch(text.strip()) else text


@dataclass(frozen=True)
class TensorInfo:
    """An input or output as the model declares it.

    ``shape`` holds ints for fixed dimensions, a string for a named (symbolic)
    dimension — the same name binds together wherever it appears — and None
    for an anonymous one, which is an unknown of its own.  Whatever the source
    (ONNX file, engine, a record's JSON), dimensions pass through
    ``dimension`` here, so every reader applies the same rule.
    """
    name: str
    dtype: str                # numpy dtype name
    shape: tuple[Any, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(dimension(d) for d in self.shape))

    def describe(self) -> str:
        """``x [?, 3, ?, ?] float32``: how error messages show a declared input."""
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name} [{dims}] {self.dtype}"
