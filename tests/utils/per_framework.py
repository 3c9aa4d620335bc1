"""A framework's dlbench modules, imported when a test asks for them.

A test parametrized over frameworks (``tests.utils.frameworks``) is collected in every
group, so its module cannot import a framework at its top; these import the one
framework of the case that runs, inside the test.  No framework is imported here.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# The module that holds a family's builder in each framework (models/<family>/<name>.py).
BUILDER_MODULE = {"pytorch": "torch", "tensorflow": "keras", "mindspore": "mindspore"}


def counting(framework: str) -> ModuleType:
    """``dlbench.models.counting.<framework>``: trainable_parameters, forward_macs."""
    return importlib.import_module(f"dlbench.models.counting.{framework}")


def weights(framework: str) -> ModuleType:
    """``dlbench.models.weights.<framework>``: export_weights, import_weights."""
    return importlib.import_module(f"dlbench.models.weights.{framework}")


def native(framework: str) -> ModuleType:
    """``dlbench.models.native.<framework>``: load, predict."""
    return importlib.import_module(f"dlbench.models.native.{framework}")


def family(name: str, framework: str) -> ModuleType:
    """A family's builder module in ``framework``, e.g. ``dlbench.models.ssd.keras``."""
    return importlib.import_module(f"dlbench.models.{name}.{BUILDER_MODULE[framework]}")


def session(framework: str) -> type:
    """The harness's training ``Session`` class of ``framework``."""
    return importlib.import_module(f"dlbench.harness.training.{framework}").Session
