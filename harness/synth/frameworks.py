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
    # Whether its module also writes a version to profile (``--scoped``): each ONNX node in
    # a profiler range of its name, so a profile's time is told to the units that spent it
    # and a reference on that backend can price them (``1x1@pytorch``).
    scoped: bool = False


VERSIONS: dict[str, Version] = {  # by the backend that runs it
    "pytorch": Version("dlbench.harness.synth.torch_net", ".pt", "torch", shape_input="x", scoped=True),
    "tensorflow": Version("dlbench.harness.synth.keras_net", ".keras", "keras"),
}


def profiled_natively() -> list[str]:
    """The native backends a reference may name: those whose version can be profiled."""
    return [b for b, v in VERSIONS.items() if v.scoped]


def input_shape(network: Path, backend: str) -> dict[str, tuple[int, ...]]:
    """What bench and profile are given for the network's version on ``backend``: [1, width]
    for its input where the format records no shape, nothing where it does."""
    name = VERSIONS[backend].shape_input
    return {name: (1, width(str(network)))} if name else {}


def native_versions(network: Path, backend: str) -> tuple[str, str]:
    """The network's version on ``backend``, to time, and its scoped one, to profile,
    written beside it (checked against ONNX Runtime as any version is).  A fit runs on a
    native reference as these; one that cannot be written fails the step."""
    from dlbench.harness.synth import ProfileFailed

    v = VERSIONS[backend]
    timed, scoped = network.with_suffix(v.suffix), network.with_name(f"{network.stem}-scoped{v.suffix}")
    for flags, out in (([], timed), (["--scoped"], scoped)):
        [result], crashed = _converted(v, [network], [out], flags)
        if "error" in result or not out.is_file():
            why = result.get("error", crashed)
            raise ProfileFailed(f"{network.name}: its {backend} version could not be written: {why}")
    return str(timed), str(scoped)


def _converted(
    v: Version, networks: list[Path], outs: list[Path], flags: list[str]
) -> tuple[list[dict[str, Any]], str]:
    """Each network's conversion result as ``v``'s module reports it in one process of its
    own (``main``'s JSON line), and the process's last stderr line: the error of any
    network it never reached or whose file is missing."""
    import json
    import subprocess
    import sys

    pairs = [str(p) for n, out in zip(networks, outs) for p in (n, out)]
    proc = subprocess.run(
        [sys.executable, "-m", v.module, *flags, *pairs],
        capture_output=True,
        text=True,
        timeout=300 + 120 * len(networks),
    )
    said = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    crashed = (proc.stderr.strip().splitlines() or ["failed"])[-1]
    return [said[i] if i < len(said) else {"error": crashed} for i in range(len(networks))], crashed


def width(network: str) -> int:
    """The network's per-sample input size, read from its ONNX file: a version whose
    format records no input shape (``shape_input``) is given [1, width]."""
    import onnx

    return onnx.load(network, load_external_data=False).graph.input[0].type.tensor_type.shape.dim[1].dim_value


def write_versions(networks: list[Path], say: Any) -> list[tuple[dict[str, str], dict[str, str]]]:
    """Each network's version per native backend whose framework is installed, and why
    any other was not written (the PyTorch one is checked against ONNX Runtime, the
    Keras one by its shapes, by the module that writes it).  One process per framework
    writes every network's: a framework's import is most of a small network's cost."""
    import importlib.util

    out: list[tuple[dict[str, str], dict[str, str]]] = [({}, {}) for _ in networks]
    for backend, v in VERSIONS.items():
        if importlib.util.find_spec(v.package) is None:
            for _, errors in out:
                errors[backend] = f"{v.package} is not installed"
            continue
        paths = [n.with_suffix(v.suffix) for n in networks]
        say(f"write the {backend} versions {', '.join(p.name for p in paths)}")
        results, crashed = _converted(v, networks, paths, [])
        for (made, errors), path, result in zip(out, paths, results):
            if "error" not in result and path.is_file():
                made[backend] = path.name
            else:
                errors[backend] = result.get("error", crashed)
    return out


def main(convert: Any, argv: list[str]) -> int:
    """``python -m MODULE NET.onnx OUT [NET.onnx OUT ...]``: one JSON line per network,
    its conversion's result or its error, so one failure leaves the others written."""
    import json

    failed = 0
    for network, out in zip(argv[0::2], argv[1::2]):
        try:
            result = convert(network, out)
        except Exception as exc:  # noqa: BLE001 - reported per network, in its line
            failed += 1
            result = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
        print(json.dumps(result), flush=True)
    return 1 if failed else 0
