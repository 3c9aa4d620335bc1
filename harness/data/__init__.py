"""Data-set readers for ``dlbench train --data``: one module per format, chosen here.

The formats, their readers and how a path is recognized are declared once, in
``formats.DATA_FORMATS`` (the help and the docs' data-format table read it too).  The
rule for ``--data VALUE``:
  * a named set (``synthetic``, the default, or ``digits``) -- no path;
  * ``FORMAT:PATH`` -- that format's reader, no detection;
  * otherwise PATH, given to the first format whose recognizer accepts it.
Nothing is ever downloaded: PATH is data the user already has.  A user's own
model (``dlbench train --model-from``) reads synthetic data or an .npz in its
signature's shape (``signature``).

No reader imports this package (they import their siblings by module), so it
may import whatever it needs; it imports the readers only when one is opened.
"""

from __future__ import annotations

from pathlib import Path

from dlbench.core.errors import UserError
from dlbench.harness.data.base import Dataset
from dlbench.harness.data.formats import DATA_FORMATS, DataFormat
from dlbench.models.registry import USER_FAMILY, ModelSpec

__all__ = ["DATA_FORMATS", "DataFormat", "canonical", "open_dataset", "parse"]


def _named(data: str) -> bool:
    return data in DATA_FORMATS and DATA_FORMATS.get(data).named


def parse(data: str) -> tuple[str, Path | None]:
    """(format, path) for a ``--data`` value; detection needs the path to exist."""
    if _named(data):
        return data, None
    fmt, sep, rest = data.partition(":")
    if sep and fmt in DATA_FORMATS and not _named(fmt):
        if not rest:
            raise UserError(f"--data {data}: no path after '{fmt}:'")
        return fmt, Path(rest).expanduser()
    path = Path(data).expanduser()
    formats = [f for f in DATA_FORMATS.all() if not f.named]
    if not path.exists():
        raise UserError(
            f"--data {data}: no such file or directory (use "
            f"{', '.join(f.name for f in DATA_FORMATS.all() if f.named)}, a path, "
            f"or FORMAT:PATH with FORMAT one of {', '.join(f.name for f in formats)})"
        )
    found = next((f for f in formats if f.recognizes(path)), None)
    if found is None:
        wanted = "; ".join(f"{f.recognized} ({f.name})".replace("`", "") for f in formats if f.recognizer)
        raise UserError(f"--data {data}: format not recognized (want {wanted}; or say FORMAT:PATH)")
    return found.name, path


def canonical(data: str) -> str:
    """The ``--data`` value as recorded: named sets as they are, paths made absolute
    (a plain path stays plain: its format is detected again the same way)."""
    fmt, path = parse(data)
    if path is None:
        return fmt
    explicit = data.startswith(f"{fmt}:")
    return f"{fmt}:{path.resolve()}" if explicit else str(path.resolve())


def open_dataset(data: str, spec: ModelSpec) -> Dataset:
    """The reader for ``data``, checked against ``spec`` (cheap: nothing decoded yet)."""
    fmt, path = parse(data)
    if spec.family == USER_FAMILY:  # a user's model: data in its signature's shape
        from dlbench.harness.data.signature import open_signature

        return open_signature(fmt, path, spec)
    if path is not None and not path.exists():
        raise UserError(f"--data {data}: no such file or directory")
    return DATA_FORMATS.get(fmt).open(spec, path)
