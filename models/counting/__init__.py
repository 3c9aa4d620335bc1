"""Parameter and multiply-add counters, one module per framework.

The generic counters hook the layers every zoo family uses (conv, dense,
LSTM); a family with products that belong to no layer (attention's q·k and
weights·v, a decoder tied to an embedding table) offers its own
``forward_macs(model, spec)`` in its builder's module, and ``family_counter``
finds it, so that one call counts any zoo network in full.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def family_counter(spec: Any, framework: str) -> Callable[..., int] | None:
    """The ``forward_macs`` of ``spec``'s builder module for ``framework``, if it has one."""
    target = getattr(spec, "builders", {}).get(framework) if spec is not None else None
    if not target:
        return None
    return getattr(importlib.import_module(target.partition(":")[0]), "forward_macs", None)
