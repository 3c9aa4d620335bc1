"""The one rule every message into a cell's process follows: it carries its version.

The parent and the cell's process may run different code (a cell under ``--with``
imports another environment's packages, a Ray worker another machine's checkout),
so each payload (``bench.payload.CellPayload``, ``training.payload.TrainPayload``)
is a dataclass written as JSON with its version and read back with that version
checked first: a mismatch is one clear line, not a KeyError deep in a measurement.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, ClassVar


class PayloadMismatch(RuntimeError):
    """The parent and the cell's process speak different payload versions."""


def check_version(what: str, message: dict[str, Any], version: int) -> None:
    got = message.get("version")
    if got != version:
        raise PayloadMismatch(
            f"{what} cell payload version {got!r}, this dlbench reads {version}: the "
            f"parent and the cell run different dlbench versions"
        )


def _dataclass_in(hint: Any) -> type | None:
    """The dataclass a field's type names, ``X`` or ``X | None``; None if none."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint
    for arg in typing.get_args(hint):
        if dataclasses.is_dataclass(arg) and isinstance(arg, type):
            return arg
    return None


class Payload:
    """Base of a cell's message: a dataclass whose ``WHAT`` and ``VERSION`` say what it is.
    ``to_json`` writes its fields (nested dataclasses as dicts) with the version;
    ``from_json`` checks the version first and rebuilds the nested dataclasses, so a
    payload is its field declarations and nothing else."""

    WHAT: ClassVar[str] = "a"
    VERSION: ClassVar[int] = 1

    def to_json(self) -> dict[str, Any]:
        return {"version": self.VERSION, **dataclasses.asdict(self)}  # type: ignore[call-overload]

    @classmethod
    def from_json(cls: type[P], message: dict[str, Any]) -> P:
        check_version(cls.WHAT, message, cls.VERSION)
        hints = typing.get_type_hints(cls)
        values = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name not in message:
                continue  # the field's default
            value, nested = message[f.name], _dataclass_in(hints[f.name])
            values[f.name] = nested(**value) if nested is not None and isinstance(value, dict) else value
        return cls(**values)


P = typing.TypeVar("P", bound=Payload)
