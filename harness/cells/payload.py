"""The one rule every message into a cell's process follows: it carries its version.

The parent and the cell's process may run different code (a cell under ``--with``
imports another environment's packages, a Ray worker another machine's checkout),
so each payload (``bench.payload.CellPayload``, ``training.payload.TrainPayload``)
is a dataclass written as JSON with its version and read back with that version
checked first: a mismatch is one clear line, not a KeyError deep in a measurement.
"""

from __future__ import annotations

from typing import Any


class PayloadMismatch(RuntimeError):
    """The parent and the cell's process speak different payload versions."""


def check_version(what: str, message: dict[str, Any], version: int) -> None:
    got = message.get("version")
    if got != version:
        raise PayloadMismatch(
            f"{what} cell payload version {got!r}, this dlbench reads {version}: the "
            f"parent and the cell run different dlbench versions"
        )
