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
        value = int(d)
        return value if value >= 0 else None  # TensorRT's and NumPy's -1: unknown
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
    dtype: str  # numpy dtype name
    shape: tuple[Any, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(dimension(d) for d in self.shape))

    def describe(self) -> str:
        """``x [?, 3, ?, ?] float32``: how error messages show a declared input."""
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name} [{dims}] {self.dtype}"


def fixed_batch(signature) -> int | None:
    """The batch a model is fixed to, or None if its batch dimension is dynamic: every
    input's dimension 0 is the same fixed int (old exporters wrote 1 and meant it)."""
    firsts = [t.shape[0] for t in signature if t.shape]
    if not firsts or any(not isinstance(d, int) for d in firsts):
        return None
    return firsts[0] if len(set(firsts)) == 1 else None


def follow_batch(signature, asked, verb: str = "ran") -> tuple[tuple[int, ...], str | None]:
    """The batch sizes a command can run a model at: ``asked``, or the model's own batch
    when it is fixed, with the note that says so (None when nothing changed)."""
    asked = tuple(asked)
    fixed = fixed_batch(signature)
    if fixed is None or asked == (fixed,):
        return asked, None
    return (fixed,), (
        f"the model's batch dimension is fixed at {fixed}: {verb} at batch "
        f"{fixed} only (asked for {','.join(map(str, asked))})"
    )


def class_count(output) -> int | None:
    """How many classes a classifier output declares: (batch, classes), or
    (batch, classes, 1, 1) from a 1×1-convolution head; None if it is neither or unknown."""
    shape = tuple(output.shape) if output is not None else ()
    if len(shape) < 2 or any(d != 1 for d in shape[2:]):
        return None
    return shape[1] if isinstance(shape[1], int) else None
