"""What we know about each native framework without importing it.

Availability is decided with ``importlib.util.find_spec`` and versions with
``importlib.metadata``, both of which read the installation on disk: the CLI
can say "not installed, install dlbench[mindspore]" in milliseconds instead of
paying several seconds of framework import.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

from dlbench.core.errors import UserError
from dlbench.core.frameworks import Framework, get_framework
from dlbench.models.user.hub import HUBS

# Packages whose versions belong in a machine's fingerprint besides the frameworks' and
# the backends' (which each backend declares: Backend.packages): the conversions' and
# the arrays' libraries, and the libraries that build models by name (models.user.hub).
OTHER_PACKAGES = tuple(
    dict.fromkeys(("numpy", "keras", "onnx", "tf2onnx", *(h.package for h in HUBS.values())))
)


def is_installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def distribution_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def require(name: str) -> Framework:
    """The framework, or a UserError that says which extra installs it."""
    fw = get_framework(name)
    if not is_installed(fw.module):
        raise UserError(f"{fw.display} is not installed: pip install 'dlbench[{fw.extra}]'")
    return fw


def version_of(name: str) -> str | None:
    return distribution_version(get_framework(name).distribution)
