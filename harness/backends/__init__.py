"""Inference backends: one module each behind ``base.Backend``.

Adding a backend is adding a module and its name to ``BACKENDS``; modules are
imported lazily and must not import their engine at module level.
"""
from __future__ import annotations

import importlib

from dlbench.harness.backends.base import Backend
from dlbench.core.errors import UserError

# Order is the order `dlbench backends` prints: engines first, then native frameworks.
BACKENDS = ("tensorrt", "onnxruntime", "ascend", "cpu-mkl", "pytorch", "tensorflow", "mindspore")
# Test doubles: accepted by name, never listed (see harness/backends/selftest.py).
HIDDEN = ("selftest",)


def get_backend(name: str) -> Backend:
    if name not in BACKENDS + HIDDEN:
        raise UserError(f"unknown backend {name!r}; choose from: {', '.join(BACKENDS)}")
    module = importlib.import_module(f"dlbench.harness.backends.{name.replace('-', '_')}")
    return module.BACKEND


def all_backends() -> list[Backend]:
    return [get_backend(n) for n in BACKENDS]
