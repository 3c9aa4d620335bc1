"""The synthetic network's framework versions, declared once: who writes each, what
format, and what its input needs that the format does not record.

Each version is written by its module in a process of its own (``python -m MODULE
NETWORK.onnx OUT``), so ``synth generate`` imports no framework; the modules read what
they build from the ONNX file itself (its graph, or the lanes in its metadata).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Version:
    module: str  # python -m MODULE NETWORK.onnx OUT
    suffix: str
    package: str  # the import that must exist for it to be written
    # The input's name where the format records no input shape (TorchScript): bench is
    # given [1, width] for it; None where the file records its own.
    shape_input: str | None = None


VERSIONS: dict[str, Version] = {  # by the backend that runs it
    "pytorch": Version("dlbench.harness.synth.torch_net", ".pt", "torch", shape_input="x"),
    "tensorflow": Version("dlbench.harness.synth.keras_net", ".keras", "keras"),
}


def write_versions(out: Path, say: Any) -> tuple[dict[str, str], dict[str, str]]:
    """The network's version per native backend whose framework is installed, and why
    any other was not written (the PyTorch one is checked against ONNX Runtime, the
    Keras one by its shapes, by the module that writes it)."""
    import importlib.util
    import subprocess
    import sys

    made, errors = {}, {}
    for backend, v in VERSIONS.items():
        if importlib.util.find_spec(v.package) is None:
            errors[backend] = f"{v.package} is not installed"
            continue
        path = out.with_suffix(v.suffix)
        say(f"write the {backend} version {path.name}")
        proc = subprocess.run(
            [sys.executable, "-m", v.module, str(out), str(path)], capture_output=True, text=True, timeout=600
        )
        if proc.returncode == 0 and path.is_file():
            made[backend] = path.name
        else:
            errors[backend] = (proc.stderr.strip().splitlines() or ["failed"])[-1]
    return made, errors
