"""A user's own model as an artifact: probed once in its framework's cell, then run like any.

The parent never imports a framework, yet it must know a model's inputs to
plan cells, so a short ``probe`` cell loads the model (or calls the
``--model-from`` code) and reports its framework, inputs and outputs.  What
the model does not record — a TorchScript archive keeps its inputs' names
but not their shapes — comes from ``--shape`` / ``--input`` files, with the
first dimension read as the batch, which then follows ``--batch-sizes``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from dlbench.core.errors import UserError
from dlbench.core.flags import Flag
from dlbench.core.frameworks import get_framework
from dlbench.harness.backends.base import ArtifactRef, TensorInfo
from dlbench.harness.bench.input_args import shape_texts, shapes_from, value_texts, values_from
from dlbench.harness.cells.payload import Payload
from dlbench.harness.formats import user_format
from dlbench.models.user import Source


def model_from_flag(verb: str, group: str | None = None) -> Flag:
    """``--model-from``, said alike by every command that takes a user's model code."""
    return Flag(
        ("--model-from",),
        group=group,
        metavar="MODULE:CALLABLE",
        help=f"{verb} the model this code returns (MODULE:CALLABLE or FILE.py:CALLABLE; "
        f"PyTorch, Keras or MindSpore), in each cell's process",
    )


def weights_flag(group: str | None = None) -> Flag:
    return Flag(
        ("--weights",),
        group=group,
        metavar="FILE",
        help="weights loaded into the --model-from model or the one model by name (timm:, "
        "torchvision:, hf:, keras:), e.g. what 'dlbench train' saved: a state_dict, Keras "
        "weights, a MindSpore checkpoint",
    )


# A user's model's inputs where its signature leaves them open (export, train, run):
# the bench's input group without the options those commands would not read.
USER_SHAPE = Flag(
    ("--shape",),
    many=True,
    metavar="NAME=AxBxC",
    help="full shape of an input your model does not size itself (first dimension: the batch)",
    read=shapes_from,
    write=shape_texts,
)
USER_INPUT = Flag(
    ("--input",),
    many=True,
    metavar="NAME=VALUE|FILE.npy",
    help="set an input, as for bench",
    read=values_from,
    write=value_texts,
)


PROBE_TIMEOUT_S = 600.0


def framework_module(framework: str):
    """``models.user.<framework>`` (imports the framework: cells only)."""
    get_framework(framework)  # an unknown one is a UserError naming the choices
    return importlib.import_module(f"dlbench.models.user.{framework}")


# What a hub's builder said of the model it built (inputs, ranges, weights), for the probe.
_BUILT: dict[str, dict[str, Any]] = {}


def load(source: Source) -> tuple[str, Any]:
    """(framework, model) in this process: the cell's side of every user-model path."""
    from dlbench.harness.machine.frameworks import require

    obj = None
    if source.kind == "hub":
        from dlbench.models.user.hub import hub_of

        hub = hub_of(source)[0]
        require(hub.framework)
        _require_package(hub)
        builder = importlib.import_module(f"dlbench.models.user.{hub.builder}")
        obj, _BUILT[source.label] = builder.build(source)
        if source.weights:  # loaded below by the framework's loader, as --model-from's are
            _BUILT[source.label]["weights"] = f"from {source.weights} (--weights)"
        framework = hub.framework
    elif source.kind == "code":
        from dlbench.models.user.code import call, framework_of

        obj = call(source)
        framework = framework_of(obj, source.label)
    else:
        framework = source.framework
    require(framework)
    return framework, framework_module(framework).load(source, obj)


def _require_package(hub) -> None:
    """The library a hub builds with, or one line naming the extra that installs it."""
    import importlib.util

    if importlib.util.find_spec(hub.package) is None:
        raise UserError(
            f"{hub.prefix}: models need {hub.package}, which is not installed "
            f"(pip install 'dlbench[{hub.extra}]')"
        )


@dataclass
class ProbePayload(Payload):
    """The ``probe`` cell's message: the model's source, and inputs to run it on when
    its outputs are asked (None: its signature only)."""

    WHAT = "probe"
    VERSION = 1

    source: dict[str, Any]  # models.user.Source.to_dict()
    run: list[dict[str, Any]] | None = None
    # More sources of the same framework, probed in the same process (probe_all).
    more: list[dict[str, Any]] | None = None


def probe_child(message: dict[str, Any]) -> dict[str, Any]:
    payload = ProbePayload.from_json(message)
    if payload.more is not None:
        probed = []
        for entry in [payload.source, *payload.more]:
            try:
                probed.append({"probed": _signature_of(Source.from_dict(entry), None)})
            except Exception as exc:  # noqa: BLE001 - probed again alone, which says why
                probed.append({"error": str(exc)})
        return {"probed": probed}
    return _signature_of(Source.from_dict(payload.source), payload.run)


def _signature_of(source: Source, run: list[dict[str, Any]] | None) -> dict[str, Any]:
    framework, model = load(source)
    module = framework_module(framework)
    if run:
        return {"outputs": _outputs(module, model, source, run)}
    from dlbench.harness.machine.frameworks import version_of

    if source.kind == "hub":
        sig = _hub_signature(module, model, source)
    else:
        sig = module.signature(model, source)
    if source.kind == "code":  # said once, with the probe: no file format to check here
        sig["notes"] = [f"runs your code ({source.model_from}) to build the model", *sig.get("notes", [])]
    return {"framework": framework, "version": version_of(framework), **sig}


def _hub_signature(module, model, source: Source) -> dict[str, Any]:
    """The builder's inputs where it sized them (a torch model records none), else the
    framework's own reading (a Keras application declares its input)."""
    facts = _BUILT[source.label]
    if "inputs" in facts:
        sig: dict[str, Any] = {"inputs": facts["inputs"], "outputs": None}
    else:
        sig = module.signature(model, source)
    from dlbench.harness.machine.frameworks import distribution_version
    from dlbench.models.user.hub import hub_of

    hub = hub_of(source)[0]
    version = distribution_version(hub.package) or "?"
    sig["notes"] = [f"{hub.what}, {hub.package} {version}; weights: {facts['weights']}", *facts["notes"]]
    sig["example_shapes"] = facts.get("example_shapes") or {}
    sig["ranges"] = facts.get("ranges") or {}
    sig["weights"] = facts["weights"]
    return sig


def _outputs(module, model, source: Source, inputs: list[dict[str, Any]]) -> list[dict]:
    """Every output's name, shape and dtype after one pass on inputs of the planned shapes
    (zeros: a valid index for any table; a value the user set is kept)."""
    import numpy as np

    arrays = [np.full(i["shape"], i.get("value", 0), dtype=i["dtype"]) for i in inputs]
    out = module.run(model, source, [i["name"] for i in inputs], arrays)
    return [{"name": k, "shape": list(v.shape), "dtype": str(v.dtype)} for k, v in out.items()]


_PROBED: dict[str, dict[str, Any]] = {}


def _probe_key(source: Source) -> str:
    """The source and the state of every file it reads: a file changed since is probed again."""
    import json
    import os

    files = [source.path, source.weights, source.model_from.rpartition(":")[0] if source.model_from else None]
    stats = [(f, os.stat(f).st_mtime_ns, os.stat(f).st_size) if f and os.path.isfile(f) else f for f in files]
    return json.dumps([source.to_dict(), stats], sort_keys=True, default=str)


def probe(source: Source, timeout: float | None = None) -> dict[str, Any]:
    """What the model's framework says of it; UserError for a model it cannot load.

    Probed once per process: ``dlbench run`` resolves the same model for its plan, its
    export and its bench, and each probe is a process that imports a framework."""
    key = _probe_key(source)
    if key not in _PROBED:
        _PROBED[key] = _probe(source, timeout)
    return _PROBED[key]


def probe_all(sources: list[Source], timeout: float | None = None) -> None:
    """Probe the files of one framework in one process, ahead of ``probe``: each probe is
    a process importing the framework (TensorFlow: ~3 s), and a sweep over ten Keras
    files spent 22 s of its 48 probing them.  A source whose batch failed (one that
    cannot load, a crash) is left to ``probe``, which says why for it alone."""
    todo: dict[str, dict[str, Source]] = {}
    for source in sources:
        key = _probe_key(source)
        if source.framework and key not in _PROBED:
            todo.setdefault(source.framework, {})[key] = source
    for group in todo.values():
        if len(group) < 2:
            continue
        first, *more = (s.to_dict() for s in group.values())
        outcome = _probe_cell(ProbePayload(first, None, more), (timeout or PROBE_TIMEOUT_S) * len(group))
        if outcome.ok:
            for key, got in zip(group, outcome.result["probed"]):
                if "probed" in got:
                    _PROBED[key] = got["probed"]


def _probe_cell(payload: ProbePayload, timeout: float):
    """The probe cell, one source's or a batch's: the framework's default threads."""
    from dlbench.harness.cells.cellenv import cell_environment
    from dlbench.harness.cells.launcher import run_cell
    from dlbench.harness.cells.threads import ThreadConfig

    return run_cell(
        "probe", payload.to_json(), env=cell_environment(ThreadConfig.default(None)), timeout=timeout
    )


def probe_files(paths: list[str], timeout: float | None = None) -> None:
    """``probe_all`` for the paths among ``paths`` that are models of a user format."""
    from pathlib import Path

    from dlbench.harness import formats
    from dlbench.models import user

    found = [
        user.sniff(p)
        for p in map(Path, paths)
        if p.is_dir() or (p.is_file() and formats.recognize(p) is None)
    ]
    probe_all([s for s in found if s is not None], timeout)


def outputs(
    source: Source, inputs: list[dict[str, Any]], timeout: float | None = None
) -> list[dict[str, Any]]:
    """The model's outputs (name, shape, dtype) on inputs of these shapes: what the
    parent cannot know without running the model (a label's shape for training)."""
    return _probe(source, timeout, inputs)["outputs"]


def _probe(source: Source, timeout: float | None, run: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    if source.framework:
        from dlbench.harness.machine.frameworks import require

        require(source.framework)  # the install hint, before any process
    outcome = _probe_cell(ProbePayload(source.to_dict(), run), timeout or PROBE_TIMEOUT_S)
    if outcome.status == "usage_error":
        raise UserError(outcome.error)
    if not outcome.ok:
        raise UserError(f"{source.label}: loading it failed ({outcome.error})")
    return outcome.result


def complete(
    source: Source,
    probed: dict[str, Any],
    shapes: dict[str, Any],
    files: dict[str, tuple[tuple[int, ...], str]],
) -> list[TensorInfo]:
    """The signature with every input's rank known: unknown ones from --shape or a file
    (``files``: name -> (shape, dtype)), whose dtype also replaces an assumed float32."""
    out = []
    for i in probed["inputs"]:
        shape, dtype = i["shape"], i["dtype"]
        if shape is None:
            file_shape, file_dtype = files.get(i["name"], (None, None))
            dtype = file_dtype or dtype
            given = file_shape or shapes.get(i["name"])
            if given is None:
                names = " ".join(f"--shape {t['name']}=1x..." for t in probed["inputs"] if t["shape"] is None)
                raise UserError(
                    f"{source.label}: {source.what} does not record its input "
                    f"shapes; give them ({names}; the first dimension is the batch)"
                )
            shape = [None, *given[1:]]
        out.append(TensorInfo(i["name"], dtype, tuple(shape)))
    return out


def artifact_ref(source: Source, probed: dict[str, Any], signature: list[TensorInfo]) -> ArtifactRef:
    framework = probed["framework"]
    meta = {
        "source": source.to_dict(),
        "kind": source.kind,
        "what": source.what,
        "framework_version": probed.get("version"),
        "outputs": probed.get("outputs"),
        "weights": probed.get("weights"),
        "signature": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in signature],
    }
    return ArtifactRef(source.path, user_format(framework), source.name, framework, source.weights, meta)


def signature_of(ref: ArtifactRef) -> list[TensorInfo]:
    return [TensorInfo(t["name"], t["dtype"], tuple(t["shape"])) for t in ref.meta["signature"]]


def source_of(ref: ArtifactRef) -> Source:
    return Source.from_dict(ref.meta["source"])
