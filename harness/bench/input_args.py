"""The command-line spellings of a model's inputs, parsed into the request's fields.

Two shape spellings fill one field (``BenchRequest.shapes``): dlbench's own
``--shape NAME=AxB`` (one input per flag) and trtexec's ``--shapes=NAME:AxB,NAME2:C``,
so a command line copied from trtexec works unchanged.  trtexec splits each
entry at its *last* ':' (a name may contain ':', e.g. TF's ``input:0``) and drops
single quotes from the name (``'input:0':1x3``); ``NAME:scalar`` or ``NAME:`` is a
0-d input.  A name given twice with two different shapes, in either spelling, is
an error: silently keeping one would measure a shape the user did not ask for.

``--input NAME=VALUE`` sets an input to one value; ``--input NAME=FILE.npy`` feeds
the user's array.  The name ends at the *first* '=' (a path may hold '=', an
input name hardly ever does).  VALUE is an integer, a finite float or true/false;
anything else is a path (checked when the plan reads it, ``bench.given``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dlbench.core.errors import UserError
from dlbench.core.flags import Also, flag

SCALAR = ("scalar", "")


def _dims(flag: str, arg: str, dims: str) -> tuple[int, ...]:
    if dims.strip().lower() in SCALAR and flag == "--shapes":
        return ()
    try:
        shape = tuple(int(d) for d in dims.lower().split("x"))
    except ValueError:
        raise UserError(f"{flag} {arg!r}: dimensions must be integers separated by 'x'") from None
    if any(d < 1 for d in shape):
        raise UserError(f"{flag} {arg!r}: every dimension must be at least 1")
    return shape


def parse_shape(arg: str) -> tuple[str, tuple[int, ...]]:
    """``NAME=1x3x224x224``: one input's whole shape, batch entry included."""
    name, sep, dims = arg.rpartition("=")
    if not sep or not name or not dims:
        raise UserError(f"--shape {arg!r}: expected NAME=DIMxDIMx... (e.g. input=1x3x224x224)")
    return name, _dims("--shape", arg, dims)


def parse_shapes(arg: str) -> list[tuple[str, tuple[int, ...]]]:
    """trtexec's ``NAME:1x3x224x224,NAME2:1x128`` (split at each entry's last ':')."""
    out = []
    for entry in arg.split(","):
        name, sep, dims = entry.rpartition(":")
        name = name.replace("'", "")
        if not sep or not name:
            raise UserError(
                f"--shapes {arg!r}: expected NAME:DIMxDIM,... as trtexec takes it "
                f"(e.g. x:1x3x224x224,mask:1x128)"
            )
        out.append((name, _dims("--shapes", entry, dims)))
    return out


def parse_int_range(arg: str) -> tuple[str, tuple[int, int]]:
    """``NAME=LOW:HIGH``: integers drawn uniformly from [LOW, HIGH)."""
    name, sep, rng = arg.rpartition("=")
    low, colon, high = rng.partition(":")
    try:
        if not sep or not name or not colon:
            raise ValueError
        lo, hi = int(low), int(high)
    except ValueError:
        raise UserError(f"--int-range {arg!r}: expected NAME=LOW:HIGH (e.g. input_ids=0:30522)") from None
    if hi <= lo:
        raise UserError(f"--int-range {arg!r}: HIGH must be greater than LOW (the range is [LOW, HIGH))")
    return name, (lo, hi)


def parse_value(text: str) -> int | float | bool | str:
    """A number or true/false as that value; anything else stays text (a file path)."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return text
    if not math.isfinite(value):
        raise UserError(f"--input value {text!r}: not a finite number")
    return value


def parse_input(arg: str) -> tuple[str, int | float | bool | str]:
    """``NAME=16000`` (a value for every element) or ``NAME=FILE.npy`` (the user's array)."""
    name, sep, value = arg.partition("=")
    if not sep or not name or not value:
        raise UserError(f"--input {arg!r}: expected NAME=VALUE or NAME=FILE.npy (e.g. sr=16000, x=image.npy)")
    try:
        return name, parse_value(value)
    except UserError:
        raise UserError(f"--input {arg!r}: not a finite number") from None


def collect(
    flag: str, pairs: Iterable[tuple[str, Any]], into: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Name -> value from every occurrence; the same name with two values is refused."""
    out = dict(into or {})
    for name, value in pairs:
        if name in out and out[name] != value:
            raise UserError(f"{flag} {name}: given twice, as {_show(out[name])} and {_show(value)}")
        out[name] = value
    return out


def _show(value: Any) -> str:
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return "x".join(map(str, value)) or "a scalar"
    return repr(value)


def shapes_from(shape_args: Iterable[str], shapes_args: Iterable[str] = ()) -> dict[str, tuple[int, ...]]:
    """``--shape`` and ``--shapes`` together: one field, conflicts refused."""
    out = collect("--shape", (parse_shape(a) for a in shape_args))
    return collect("--shape/--shapes", (p for a in shapes_args for p in parse_shapes(a)), out)


def shape_texts(shapes: dict[str, tuple[int, ...]]) -> list[Any]:
    """``--shape`` texts; a 0-d input in trtexec's spelling, which alone can say it."""
    return [
        f"{name}=" + "x".join(map(str, shape)) if shape else ("--shapes", f"{name}:scalar")
        for name, shape in shapes.items()
    ]


def parse_dim(arg: str) -> tuple[str, list[int]]:
    """``sequence=64,128,256``: a named dynamic dimension and the sizes to sweep it at."""
    name, sep, sizes = arg.partition("=")
    try:
        values = [int(v) for v in sizes.split(",") if v.strip()]
    except ValueError:
        values = []
    if not sep or not name.strip() or not values or any(v < 1 for v in values):
        raise UserError(f"--dim {arg!r}: expected NAME=SIZE[,SIZE...] with sizes >= 1 (e.g. sequence=64,128)")
    return name.strip(), list(dict.fromkeys(values))


def dims_from(given: Iterable[str]) -> dict[str, list[int]]:
    return collect("--dim", (parse_dim(a) for a in given))


def dim_texts(dims: dict[str, list[int]]) -> list[str]:
    return [f"{n}={','.join(map(str, v))}" for n, v in dims.items()]


def ranges_from(given: Iterable[str]) -> dict[str, tuple[int, int]]:
    return dict(parse_int_range(r) for r in given)


def range_texts(ranges: dict[str, tuple[int, int]]) -> list[str]:
    return [f"{n}={lo}:{hi}" for n, (lo, hi) in ranges.items()]


def values_from(given: Iterable[str]) -> dict[str, Any]:
    return collect("--input", (parse_input(a) for a in given))


def value_texts(values: dict[str, Any]) -> list[str]:
    return [f"{n}={str(v).lower() if isinstance(v, bool) else v}" for n, v in values.items()]


INPUTS_GROUP = "inputs (any ONNX model)"


@dataclass(kw_only=True)
class InputFields:
    """The input options, one declared group: mixed into every request that synthesizes
    a model's inputs (bench, build, verify), so each spells them alike."""

    shapes: dict[str, tuple[int, ...]] = flag(
        "--shape",
        factory=dict,
        many=True,
        group=INPUTS_GROUP,
        metavar="NAME=AxBxC",
        help="full shape of an input with dynamic dimensions (the batch dimension "
        "follows the batch sizes); repeat per input",
        also=(
            Also(
                "--shapes",
                "the same in trtexec's form (split at each entry's last ':'; NAME:scalar "
                "for a 0-d input); may be combined with --shape",
                "NAME:AxB,NAME2:C",
            ),
        ),
        read=shapes_from,
        write=shape_texts,
    )
    int_ranges: dict[str, tuple[int, int]] = flag(
        "--int-range",
        factory=dict,
        many=True,
        group=INPUTS_GROUP,
        metavar="NAME=LOW:HIGH",
        help="integer input values drawn from [LOW, HIGH)",
        read=ranges_from,
        write=range_texts,
    )
    # A value (int, float, bool) for every element, or a .npy path (bench.given).
    inputs: dict[str, int | float | bool | str] = flag(
        "--input",
        factory=dict,
        many=True,
        group=INPUTS_GROUP,
        metavar="NAME=VALUE|FILE.npy",
        help="set an input: one value for every element (e.g. sr=16000; checked "
        "against the model's dtype), or your own array (its dynamic dimensions set "
        "the input's; the batch takes its first rows, repeated if too few); repeat per input",
        read=values_from,
        write=value_texts,
    )


def swept_shapes(
    signature: Sequence[Any], shapes: dict[str, tuple[int, ...]], dims: dict[str, list[int]], label: str
) -> list[tuple[dict[str, int], dict[str, tuple[int, ...]]]]:
    """One (sizes, shapes) pair per point of the ``--dim`` sweep: every input dimension the
    model names NAME takes each size in turn, the rest of its shape from ``shapes`` (the
    user's --shape or the model's own sizes), else from the signature itself."""
    if not dims:
        return [({}, shapes)]
    named = {d for t in signature for d in t.shape[1:] if isinstance(d, str)}
    for name in dims:
        if name not in named:
            have = ", ".join(sorted(named)) or "none besides the batch"
            raise UserError(f"--dim {name}: {label} has no input dimension named {name!r} (named: {have})")
    points = []
    for sizes in itertools.product(*dims.values()):
        point = dict(zip(dims, sizes))
        out = dict(shapes)
        for t in signature:
            if not any(d in point for d in t.shape[1:]):
                continue
            base = shapes.get(t.name) or tuple(1 if i == 0 else d for i, d in enumerate(t.shape))
            full = [point.get(d, b) if i else b for i, (d, b) in enumerate(zip(t.shape, base))]
            if all(isinstance(d, int) for d in full):
                out[t.name] = tuple(full)
        points.append((point, out))
    return points
