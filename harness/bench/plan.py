"""A bench request expanded into its cells, each with the identity that stores and resumes it.

Cells are the product artifact x backend x device x precision x batch size x
threads x scenario.  Everything that can be refused is refused here, before the
first cell starts (one line, exit 2): a sweep never dies half-way on input it
could have rejected up front.  Two cells with the same identity are one cell.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.backends import BACKENDS, check_options, get_backend
from dlbench.harness.backends.base import Backend
from dlbench.harness.bench import inputs as inputs_mod
from dlbench.harness.bench.advice import advise
from dlbench.harness.bench.artifacts import Artifact, resolve, resolve_code, weights_for
from dlbench.harness.bench.axes import artifact_axes
from dlbench.harness.bench.given import GivenInput
from dlbench.harness.bench.request import BenchRequest
from dlbench.harness.cells.allocator import DEFAULT_ALLOCATOR
from dlbench.harness.cells.allocator import identity as allocator_identity
from dlbench.harness.cells.cellenv import cell_environment
from dlbench.harness.cells.mathmode import TF32, check_env
from dlbench.harness.cells.threads import ThreadConfig
from dlbench.harness.formats import TRT_ENGINE
from dlbench.harness.machine.fingerprint import fingerprint
from dlbench.harness.output.tables import counted
from dlbench.harness.store.context import cell_key


@dataclass
class Cell:
    artifact: Artifact
    backend: Backend
    device: str
    precision: str
    batch_size: int
    scenario: str
    intra_op: int
    inter_op: int
    options: dict[str, Any]
    shapes: dict[str, tuple[int, ...]]
    int_ranges: dict[str, tuple[int, int]]
    gflops: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)
    given: dict[str, GivenInput] = field(default_factory=dict)  # --input
    allocator: str = DEFAULT_ALLOCATOR  # --allocator
    env: str = ""  # --with PACKAGE==VERSION ("": the installed packages)
    dims: dict[str, int] = field(default_factory=dict)  # this cell's point of the --dim sweep

    @property
    def label(self) -> str:
        return (
            f"{self.artifact.ref.model} on {self.backend.name} {self.device} {self.precision} "
            f"batch {self.batch_size} {self.scenario} ({counted(self.intra_op, 'thread')})"
            + (f" [{self.env}]" if self.env else "")
        )

    def environment(self, overlay: Any = None) -> dict[str, str]:
        """The variables the cell's process starts with: thread pools are sized, the
        allocator chosen and a --with overlay put first on the import path before import."""
        from dlbench.harness.cells import envs

        return cell_environment(
            ThreadConfig(self.intra_op, self.inter_op),
            self.allocator,
            {
                **self.backend.environment(self.options, self.intra_op, self.inter_op),
                **self.backend.math_environment(self.device, self.precision, self.options),
                **(envs.environment(overlay) if overlay else {}),
            },
        )


def identity(c: Cell, req: BenchRequest, machine_id: str) -> dict[str, Any]:
    """Everything that makes two measurements the same measurement (the resume key's source)."""
    ident = {
        "artifact": {k: v for k, v in c.artifact.identity().items() if k != "path"},
        "backend": c.backend.name,
        "device": c.device,
        "device_id": req.device_id,
        "precision": c.precision,
        "batch_size": c.batch_size,
        "scenario": c.scenario,
        "threads": [c.intra_op, c.inter_op],
        "options": c.options,
        "rule": req.rule.to_dict(),
        "shapes": {k: list(v) for k, v in c.shapes.items()},
        "int_ranges": {k: list(v) for k, v in c.int_ranges.items()},
        "seed": req.seed,
        "repeats": req.repeats,
        "machine_id": machine_id,
    }
    if c.scenario == "server":
        ident["server"] = req.server_params()
    ident.update(allocator_identity(c.allocator))
    if c.given:  # absent when unused: older cells keep their keys
        ident["inputs"] = {k: g.identity() for k, g in sorted(c.given.items())}
    if c.env:
        ident["with"] = c.env
    return ident


def identity_key(c: Cell, req: BenchRequest, machine_id: str) -> str:
    return cell_key("bench", identity(c, req, machine_id))


def device_reason(backend: Backend, device: str) -> str:
    fp = fingerprint()
    if device == "cuda" and not fp["gpus"]:
        return "no NVIDIA GPU on this machine (nvidia-smi found none)"
    if device == "ascend" and not fp["ascend"]:
        return "no Ascend NPU on this machine (no /dev/davinci*)"
    devices = backend.availability().devices
    extra = {"onnxruntime": " (needs onnxruntime-gpu)", "pytorch": " (this PyTorch is a CPU build)"}.get(
        backend.name, ""
    )
    return f"{backend.name} runs on {', '.join(devices) or 'nothing here'}{extra}"


def _backends(req: BenchRequest, artifacts: list[Artifact]) -> tuple[list[Backend], list[str]]:
    names = req.backend_names()
    if not names:
        raise UserError("no backend given (--backend NAME, or 'all' for every available one)")
    notes: list[str] = []
    if req.all_backends():
        formats = {a.format for a in artifacts}
        chosen = []
        for name in BACKENDS.names():
            b = get_backend(name)
            if not formats & set(b.formats):
                continue
            a = b.availability()
            if a.available:
                chosen.append(b)
            else:
                notes.append(f"backend {name} skipped: {a.reason}")
        if not chosen:
            raise UserError("no available backend takes these artifacts; see 'dlbench backends'")
        return chosen, notes
    chosen = [get_backend(n) for n in names]
    for b in chosen:
        a = b.availability()
        if not a.available:
            raise UserError(f"backend {b.name} is not available here: {a.reason}")
    return chosen, notes


def _check_fit(req: BenchRequest, artifacts: list[Artifact], backends: list[Backend]) -> None:
    """Every artifact has a backend, every backend an artifact, every option and input a taker."""
    for art in artifacts:
        if not any(art.format in b.formats for b in backends):
            takes = "; ".join(f"{b.name}: {', '.join(b.formats)}" for b in backends)
            raise UserError(
                f"{art.label} is a {art.format} artifact; none of "
                f"{', '.join(b.name for b in backends)} takes one ({takes})"
            )
    for b in backends:
        if not any(a.format in b.formats for a in artifacts):
            raise UserError(f"backend {b.name} takes {', '.join(b.formats)}; none of the artifacts is one")
    check_options(req.options, [b.name for b in backends])
    for name in list(req.shapes) + list(req.int_ranges) + list(req.inputs):
        if not any(a.signature is None or name in [t.name for t in a.signature] for a in artifacts):
            flag = "--shape" if name in req.shapes else "--int-range" if name in req.int_ranges else "--input"
            inputs = "; ".join(
                f"{a.label}: {inputs_mod.describe_signature(a.signature)}"
                for a in artifacts
                if a.signature is not None
            )
            raise UserError(f"{flag} {name}: no artifact has an input {name!r}; inputs: {inputs}")


class _Unavailable(UserError):
    """This backend cannot run the asked precision on this device (``--backend all``: a note)."""


def cell_precision(art: Artifact, backend: Backend, device: str, asked: str) -> str:
    """The precision ``art`` runs in on ``backend`` and ``device``, ``asked`` being the
    user's --precision or "auto" (its own; fp32 for a native model); bench's cells and
    profile's cell ask the same question."""
    if asked == TF32:  # float32 in TensorFloat-32 math: a mode of an fp32 model
        own = art.own_precision or "fp32"
        if TF32 not in backend.precisions(device):
            raise _Unavailable(
                f"--precision tf32: {backend.name} on {device}: {backend.precision_reason(device, TF32)}"
            )
        if own != "fp32":
            raise UserError(
                f"--precision tf32: {art.label} is an {own} model; tf32 is a math mode for fp32 models"
            )
        if art.format == TRT_ENGINE:
            raise UserError(
                f"--precision tf32: {art.label}'s TF32 was fixed when it was built; "
                f"bench its ONNX file with -b tensorrt, which builds it in the cell"
            )
        return TF32
    own = art.own_precision
    if own is not None:
        if asked not in ("auto", own):
            raise UserError(
                f"{art.label} is {_a(own)} model and {backend.name} runs a model in its "
                f"own precision: {_how_to_make(asked)} or drop --precision"
            )
        return own
    allowed = backend.precisions(device)
    if asked == "auto":
        return "fp32"
    if asked not in allowed:
        raise _Unavailable(f"--precision {asked}: {backend.precision_reason(device, asked)}")
    return asked


def _a(word: str) -> str:
    """The article a precision's name takes when read aloud ("an fp32", "a bf16")."""
    return ("an " if word[:1] in "aefhilmnorsx" else "a ") + word


def _how_to_make(precision: str) -> str:
    """Which ``dlbench build`` targets make a model of ``precision`` (their declarations)."""
    from dlbench.converters.base import BUILD_TARGETS, build_hop

    if precision == "fp32":  # every build starts from an fp32 ONNX file
        return "bench the fp32 model it was built from"
    hops = {t: build_hop(t) for t in BUILD_TARGETS.names()}
    # One-precision targets first (the simpler build), then the engines' --precision.
    makers = [t for t, h in hops.items() if not h.precisions and h.makes(precision)]
    makers += [f"{t} --precision {precision}" for t, h in hops.items() if h.precisions and h.makes(precision)]
    if not makers:
        return f"no dlbench build target makes {_a(precision)} model: bench a file exported in it"
    return "make one first (" + "; ".join(f"dlbench build --to {m}" for m in makers) + ")"


def validate(req: BenchRequest) -> tuple[list[Cell], list[str]]:
    """Every cell of the sweep, or a UserError; plus notes for the user."""
    req.check()
    hints = {"shapes": req.shapes, "inputs": req.inputs, "timeout": req.timeout}
    if req.model is None:
        from dlbench.harness.usermodel import probe_files

        probe_files(req.artifacts, req.timeout)
    filled = weights_for(req.artifacts, req.model_from, req.weights)
    artifacts = [resolve(a, req.model, weights=filled.get(a), **hints) for a in req.artifacts]
    if req.model_from:
        artifacts.append(resolve_code(req.model_from, req.weights, **hints))
    backends, notes = _backends(req, artifacts)
    for art in artifacts:
        notes += art.notes
    _check_fit(req, artifacts, backends)
    devices_asked = req.device_names()
    precisions_asked = req.precision_names()
    threads, inter, scenarios = req.thread_counts(), req.inter_op(), req.scenario_names()

    cells: list[Cell] = []
    for art, axes in ((a, x) for a in artifacts for x in artifact_axes(a, req, notes)):
        for backend in backends:
            if art.format not in backend.formats:
                continue
            options = backend.resolve_options(req.options)
            if art.format == TRT_ENGINE:
                from dlbench.harness.backends.tensorrt import check_engine_here

                check_engine_here(art.ref.path)
            for device in devices_asked or [backend.default_device()]:
                if device not in backend.availability().devices:
                    if req.all_backends():
                        notes.append(
                            f"backend {backend.name} skipped on {device}: {device_reason(backend, device)}"
                        )
                        continue
                    raise UserError(f"--device {device}: {device_reason(backend, device)}")
                for asked in precisions_asked:
                    try:
                        precision = cell_precision(art, backend, device, asked)
                    except _Unavailable as exc:
                        if not req.all_backends():
                            raise
                        notes.append(f"backend {backend.name} skipped: {exc}")
                        continue
                    for s in scenarios:
                        for b in axes.sizes_by_scenario[s]:
                            for t, env in itertools.product(threads, req.with_specs or [""]):
                                cells.append(
                                    Cell(
                                        art,
                                        backend,
                                        device,
                                        precision,
                                        b,
                                        s,
                                        t,
                                        inter,
                                        options,
                                        axes.shapes,
                                        axes.ranges,
                                        axes.gflops,
                                        list(axes.shape_notes),
                                        axes.given,
                                        req.allocator,
                                        env,
                                        dict(axes.dims),
                                    )
                                )
    if not cells:
        raise UserError(
            "nothing to run: "
            + (notes[-1] if notes else "no backend can take these artifacts on these devices")
        )
    for precision in sorted({c.precision for c in cells}):
        check_env(precision)  # a variable that contradicts it refuses the sweep here
    machine_id = fingerprint()["machine_id"]
    unique = {}
    for c in cells:
        unique.setdefault(identity_key(c, req, machine_id), c)
    return list(unique.values()), notes + advise(list(unique.values()))
