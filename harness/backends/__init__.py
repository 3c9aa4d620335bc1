"""Inference backends: one module each behind ``base.Backend``, declared in ``BACKENDS``.

Adding a backend is adding a module and one ``BACKENDS.register`` line (or, from
outside dlbench, a plugin: ``dlbench.core.registry``).  Entries are lazy
``"module:BACKEND"`` references and no backend module imports its engine at
module level, so listing them (``dlbench backends``, ``bench --help``) is cheap.
"""

from __future__ import annotations

from typing import Any

from dlbench.core.errors import UserError
from dlbench.core.registry import Registry
from dlbench.harness.backends.base import Backend, Option

BACKENDS: Registry[Backend] = Registry("backend")
# Declaration order is the order `dlbench backends` prints: engines first, then frameworks.
for _name in (
    "tensorrt",
    "onnxruntime",
    "openvino",
    "ascend",
    "cpu-mkl",
    "pytorch",
    "tensorflow",
    "mindspore",
):
    BACKENDS.register(_name, f"dlbench.harness.backends.{_name.replace('-', '_')}:BACKEND")
# A test double: accepted by name, never listed (see harness/backends/selftest.py).
BACKENDS.register("selftest", "dlbench.harness.backends.selftest:BACKEND", hidden=True)


def get_backend(name: str) -> Backend:
    return BACKENDS.get(name)


def all_backends() -> list[Backend]:
    return BACKENDS.all()


def declared_options() -> dict[str, list[tuple[Backend, Option]]]:
    """Option name -> every listed backend that declares it, with its declaration: the
    bench flags, ``dlbench backends --options`` and the docs are made from this."""
    out: dict[str, list[tuple[Backend, Option]]] = {}
    for backend in all_backends():
        for option in backend.options:
            out.setdefault(option.name, []).append((backend, option))
    return out


def check_options(options: dict[str, Any], names: list[str]) -> None:
    """Each option one of the named backends (every backend, where none is named) declares,
    with a value each of them takes: bench and run refuse the rest before any cell runs."""
    backends = [get_backend(n) for n in names] or all_backends()
    for key, value in options.items():
        declared = [(b, o) for b in backends if (o := b.option(key)) is not None]
        if not declared:
            offered = "; ".join(
                f"{b.name}: {', '.join(o.name for o in b.options) or 'none'}" for b in backends
            )
            raise UserError(f"option {key!r} applies to none of the backends ({offered})")
        for b, o in declared:
            o.parse(b.name, value)
    for b in backends:
        why = b.conflict(b.resolve_options(b.own_options(options)))
        if why:
            raise UserError(f"{b.name}: {why}")


def options_argv(options: dict[str, Any]) -> list[str]:
    """``options`` as bench's command line gives them (``-O NAME=VALUE`` each)."""
    return [a for k, v in options.items() for a in ("-O", f"{k}={v}")]
