"""Training a user's own model: its signature becomes the spec the sessions train.

The sessions and the loop train any ``ModelSpec``; a user's model has none, so
one is made here from what its framework says (``harness.usermodel``): the
inputs as the bench input plan sizes them (``--shape``, ``--input``,
``--int-range`` as for bench), and the output training minimizes, found by
running the model once on inputs of those shapes.  ``--objective`` says what
that output is: class scores on its last axis (cross-entropy; labels in its
other dimensions) or values (mean squared error; targets in its shape).  The
spec's builder loads the model again in the training cell and wraps it so
that it returns that one output (``models.user.<framework>.trainable``); the
trained model is saved in the user's own format (``save_trained``).

Files that hold an inference graph rather than a trainable model are refused
with the reason: a torch.export program, a SavedModel, a MindIR graph.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from dlbench.core.errors import UserError
from dlbench.models.registry import USER_FAMILY, InputSpec, ModelSpec, RunDefaults
from dlbench.models.user import Source

DEFAULT_BATCH = 32
# SGD with momentum 0.9 at the zoo CNNs' 0.05 diverges on many small regressors.
DEFAULT_LR = 0.01
NOT_TRAINABLE = {
    "torch-export": "a torch.export program is a traced inference graph (batch norm and "
    "dropout fixed in eval mode); train the code that builds it "
    "(--model-from FILE.py:CALLABLE)",
    "savedmodel": "a SavedModel's serving signature is a function, not a Keras model to "
    "train; train the .keras file or the code that builds it",
    "mindir": "a MindIR graph loads as an inference GraphCell, which MindSpore cannot "
    "train; train the nn.Cell code that builds it (--model-from)",
}


def spec_of_request(req) -> ModelSpec:
    """The spec of ``dlbench train``'s user model (a ``TrainRequest``), resolved by the one
    resolver bench and export use."""
    from dlbench.harness.bench.artifacts import resolve, resolve_code
    from dlbench.models.user import sniff

    if req.model_from and req.model:
        raise UserError(f"give a model file ({req.model}) or --model-from, not both")
    # What needs no framework is checked before the model is probed in its framework.
    source = None if req.model_from else sniff(Path(req.model))
    if source is not None and source.kind in NOT_TRAINABLE:
        raise UserError(f"{req.model}: {NOT_TRAINABLE[source.kind]}")
    _check_objective(req.objective)
    if req.model_from:
        art = resolve_code(
            req.model_from, req.weights, shapes=req.shapes, inputs=req.inputs, timeout=req.timeout
        )
    else:
        hints = {"shapes": req.shapes, "inputs": req.inputs, "timeout": req.timeout}
        art = resolve(req.model, weights=req.weights, **hints)  # a model by name takes them
    if not art.user:
        raise UserError(
            f"{art.label}: dlbench trains a framework's own model (TorchScript, "
            f".keras, .h5, nn.Module/keras.Model/nn.Cell code), not "
            f"{art.format}"
        )
    framework = art.ref.framework
    if framework == "tensorflow" and art.ref.meta["kind"] not in ("code", "hub") and req.precision == "amp":
        # Code builds under the session's dtype policy; a saved model keeps its own.
        raise UserError(
            f"{art.label}: --precision amp: the saved model's layers keep their "
            f"own dtype policy (float32); train the code that builds it "
            f"(--model-from) for amp"
        )
    others = [f for f in req.frameworks if f != framework]
    if others:
        raise UserError(
            f"--framework {', '.join(others)}: {art.label} is a {framework} "
            f"model; it trains in {framework} only"
        )
    return _spec_for(
        art,
        objective=req.objective,
        batch_size=req.batch_size,
        shapes=req.shapes,
        given=req.inputs,
        int_ranges=req.int_ranges,
        loss_output=req.loss_output,
        timeout=req.timeout,
    )


def _spec_for(
    art,
    *,
    objective: str,
    batch_size: int | None,
    shapes,
    given,
    int_ranges,
    loss_output: str | None,
    timeout: float | None,
) -> ModelSpec:
    """The spec of a user's model resolved as ``art`` (``bench.artifacts``), whose kind and
    objective ``spec_of_request`` has checked; UserError for inputs or an output that
    cannot be trained as asked (parent side: the output probe runs in a cell)."""
    from dlbench.harness import usermodel
    from dlbench.harness.bench import inputs as input_plan
    from dlbench.harness.bench.given import read_all

    given = read_all(given)
    source = usermodel.source_of(art.ref)
    plan = input_plan.plan(
        art.signature,
        batch_size or DEFAULT_BATCH,
        art.shapes_for(shapes, given),
        int_ranges,
        art.graph_ranges,
        given,
    )
    fills = []
    for p in plan.inputs:
        if len(p.shape) == 0 or p.shape[0] != plan.batch_size:
            raise UserError(
                f"input {p.name!r} has no batch dimension; dlbench trains models whose inputs all have one"
            )
        fills.append(p.describe())
    outputs = usermodel.outputs(source, fills, timeout)
    out = _picked(art.label, outputs, loss_output, plan.batch_size)
    per_sample = out["shape"][1:]
    if objective == "classification":
        if not per_sample or per_sample[-1] < 2:
            raise UserError(
                f"{art.label}: output {out['name']!r} is {out['shape']}; "
                f"classification reads at least 2 class scores on its last axis "
                f"(use --objective regression for values)"
            )
        classes, label_shape = per_sample[-1], per_sample[:-1]
    else:
        classes, label_shape = 0, per_sample
    name = art.ref.model
    return ModelSpec(
        name=name,
        display_name=name,
        family=USER_FAMILY,
        task=objective,
        network_type="user model",
        dataset="synthetic",
        inputs=tuple(
            InputSpec(p.name, tuple(p.shape[1:]), p.dtype, (p.low, p.high) if p.fill == "uniform" else None)
            for p in plan.inputs
        ),
        num_classes=classes,
        default_batch_size=plan.batch_size,
        builders={art.ref.framework: f"{__name__}:build"},
        config={
            "learning_rate": DEFAULT_LR,
            "user": {
                "source": source.to_dict(),
                "fills": fills,
                "output": out["name"],
                "output_shape": per_sample,
                "label_shape": label_shape,
                "outputs": outputs,
                "notes": plan.notes + art.notes,
            },
        },
        objective=objective,
        run=RunDefaults(),
    )


def _check_objective(objective: str | None) -> None:
    from dlbench.harness.training.objectives import user_objectives

    if objective not in user_objectives():
        raise UserError(
            f"a model of your own needs --objective "
            f"({' or '.join(user_objectives())}): the loss depends on what its "
            f"output is"
        )


def _picked(arg: str, outputs: list[dict[str, Any]], wanted: str | None, batch: int) -> dict[str, Any]:
    names = ", ".join(o["name"] for o in outputs)
    if wanted is None:
        out = outputs[0]
    else:
        out = next((o for o in outputs if o["name"] == wanted), None)
        if out is None:
            raise UserError(f"--loss-output {wanted}: the model has no output {wanted!r} (it has: {names})")
    if not out["dtype"].startswith(("float", "bfloat")):
        raise UserError(
            f"{arg}: output {out['name']!r} is {out['dtype']}; training needs a "
            f"floating-point output (choose one with --loss-output; outputs: "
            f"{names})"
        )
    if not out["shape"] or out["shape"][0] != batch:
        raise UserError(
            f"{arg}: output {out['name']!r} is {out['shape']} for a batch of "
            f"{batch}: it has no batch dimension to train on"
        )
    return out


def to_dict(spec: ModelSpec) -> dict[str, Any]:
    """What the training cell needs to rebuild the spec (``from_dict``)."""
    d = {
        k: getattr(spec, k)
        for k in (
            "name",
            "display_name",
            "family",
            "task",
            "network_type",
            "dataset",
            "num_classes",
            "default_batch_size",
            "builders",
            "config",
            "objective",
        )
    }
    d["inputs"] = [asdict(i) for i in spec.inputs]
    return d


def from_dict(d: dict[str, Any]) -> ModelSpec:
    inputs = tuple(
        InputSpec(i["name"], tuple(i["shape"]), i["dtype"], tuple(i["int_range"]) if i["int_range"] else None)
        for i in d["inputs"]
    )
    return ModelSpec(**{**d, "inputs": inputs})


def is_user(spec: ModelSpec) -> bool:
    return spec.family == USER_FAMILY


def build(spec: ModelSpec, **overrides) -> Any:
    """The spec's builder, in the training cell: the user's model (loaded again, or built
    by its code) returning the output training minimizes."""
    from dlbench.harness import usermodel

    if overrides:
        raise TypeError(f"a user's model takes no builder options ({', '.join(overrides)})")
    cfg = spec.config["user"]
    source = Source.from_dict(cfg["source"])
    framework, model = usermodel.load(source)
    module = usermodel.framework_module(framework)
    net = module.trainable(model, source, [i.name for i in spec.inputs], cfg["output"])
    if framework == "tensorflow":
        # A subclassed Keras model has no variables until first called, and the session's
        # optimizer is built on the variables there are: call it once, on zeros.
        import numpy as np

        net([np.zeros((1, *i.shape), i.dtype) for i in spec.inputs], training=False)
    return net


def save(session, directory: Path) -> str:
    """The trained model in the user's own format (a file to bench again, or the weights
    for ``--model-from ... --weights``)."""
    from dlbench.harness import usermodel

    source = Source.from_dict(session.spec.config["user"]["source"])
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return usermodel.framework_module(session.framework).save_trained(
        session.model, source, directory, session.spec.name
    )
