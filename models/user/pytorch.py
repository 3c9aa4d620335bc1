"""PyTorch models the user brings: TorchScript archives, torch.export programs, code.

A TorchScript archive records its inputs' names but not their shapes or
dtypes (float32 is assumed and said), so its shapes come from ``--shape`` or
``--input``; a torch.export program carries its example inputs and which of
their dimensions are dynamic.  Outputs are named after the model's own
structure: a dict's keys, a tuple's positions (``output_0``...), or
``output`` for a single tensor.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import torch

from dlbench.core.errors import UserError, first_line
from dlbench.models.user import Source

_NOT_TENSOR = "its inputs must all be tensors"


def load(source: Source, obj: Any = None) -> Any:
    """The model in eval mode on the CPU; ``obj`` is what ``--model-from`` returned."""
    try:
        if source.kind == "torchscript":
            model = torch.jit.load(source.path, map_location="cpu")
        elif source.kind == "torch-export":
            model = _export_load(source).module()
        else:
            model = obj
            if source.weights:
                state = _weights(source.weights)
                model.load_state_dict(state.get("state_dict", state) if isinstance(state, dict) else state)
    except (RuntimeError, ValueError, OSError, KeyError) as exc:
        raise UserError(f"{source.label}: PyTorch cannot load it ({first_line(exc)})") from None
    if source.kind == "torch-export":
        return model  # an exported module has no train/eval switch: it is traced
    return model.eval()


def _weights(path: str) -> Any:
    """A ``--weights`` file under PyTorch's restricted unpickler; one that needs more (a
    pickled module, custom classes) runs code when loaded, so it takes --trust-model."""
    import pickle

    from dlbench.models.user import trust

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if not trust.trusted():
            named = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(exc))
            why = f"{named.group(1)} (not a tensor or container)" if named else "objects other than tensors"
            trust.require(
                path,
                [why],
                "the checkpoint holds objects the restricted loader refuses, which loading would run "
                "(save the state_dict alone to avoid it)",
            )
        return torch.load(path, map_location="cpu", weights_only=False)


def _export_load(source: Source) -> Any:
    """``torch.export.load``, after the archive's pickled members are checked (``trust``)."""
    from dlbench.models.user import trust

    risks = trust.export_archive_risks(source.path)
    what = "this torch.export archive holds members that can run code when loaded"
    trust.require(source.label, risks, what)
    return torch.export.load(source.path)


def signature(model: Any, source: Source) -> dict[str, Any]:
    """Inputs (name, dtype, shape; shape None when only the user can say) and outputs."""
    if source.kind == "torch-export":
        return _exported(_export_load(source))
    notes = []
    if isinstance(model, torch.jit.ScriptModule):
        args = model.forward.schema.arguments[1:]
        for a in args:
            if str(a.type) not in ("Tensor", "Optional[Tensor]"):
                raise UserError(f"{source.label}: argument {a.name!r} is {a.type}; {_NOT_TENSOR}")
        names = [a.name for a in args]
    else:
        import inspect

        params = inspect.signature(model.forward).parameters.values()
        names = [
            p.name
            for p in params
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
    notes.append(
        f"{source.what} does not record its input shapes or dtypes: shapes from "
        f"--shape/--input, dtype float32 unless an --input file says otherwise"
    )
    inputs = [{"name": n, "dtype": "float32", "shape": None} for n in names]
    return {"inputs": inputs, "outputs": None, "notes": notes}


def _exported(ep) -> dict[str, Any]:
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    inputs, examples = [], {}
    args = list(ep.example_inputs[0]) if ep.example_inputs else []
    for k, name in enumerate(ep.graph_signature.user_inputs):
        val = placeholders[name].meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise UserError(f"torch.export program: input {name!r} is not a tensor; {_NOT_TENSOR}")
        dims = [int(d) if isinstance(d, int) or str(d).isdigit() else str(d) for d in val.shape]
        inputs.append({"name": name, "dtype": str(val.dtype).removeprefix("torch."), "shape": dims})
        if k < len(args) and isinstance(args[k], torch.Tensor) and any(isinstance(d, str) for d in dims[1:]):
            examples[name] = [1, *args[k].shape[1:]]  # the export's own sizes
    spec = ep.call_spec.out_spec
    outputs = None
    if spec is not None and spec.context is not None and isinstance(spec.context, list):
        outputs = [str(k) for k in spec.context]  # a dict's keys
    return {"inputs": inputs, "outputs": outputs, "notes": [], "example_shapes": examples}


def flatten(out: Any) -> dict[str, torch.Tensor]:
    """The model's outputs by name: dict keys, tuple positions, or ``output``."""
    if isinstance(out, torch.Tensor):
        return {"output": out}
    if isinstance(out, dict):
        items = out.items()
    elif isinstance(out, (tuple, list)):
        items = ((f"output_{i}", v) for i, v in enumerate(out))
    elif hasattr(out, "_asdict"):
        items = out._asdict().items()
    else:
        raise UserError(
            f"the model returned a {type(out).__name__}; dlbench reads tensors, "
            f"and tuples, lists and dicts of them"
        )
    flat: dict[str, torch.Tensor] = {}
    for k, v in items:
        if isinstance(v, torch.Tensor):
            flat[str(k)] = v
        else:
            flat.update({f"{k}.{kk}": vv for kk, vv in flatten(v).items()})
    return flat


def to_numpy(out: Any) -> dict[str, np.ndarray]:
    return {
        k: v.detach().float().cpu().numpy() if v.is_floating_point() else v.cpu().numpy()
        for k, v in flatten(out).items()
    }


def run(model: Any, source: Source, names: list[str], arrays: list[np.ndarray]) -> dict:
    """One inference pass on host arrays (inputs in ``names`` order): outputs by name."""
    with torch.no_grad():
        return to_numpy(model(*(torch.from_numpy(a) for a in arrays)))


class Picked(torch.nn.Module):
    """The user's network returning only the output training minimizes: the session's
    loss takes one tensor whatever structure (dict, tuple, nesting) the model returns."""

    def __init__(self, net: torch.nn.Module, output: str):
        super().__init__()
        self.net, self.output = net, output

    def forward(self, *x):
        return flatten(self.net(*x))[self.output]


def trainable(model: Any, source: Source, names: list[str], output: str) -> Picked:
    return Picked(model, output)


def save_trained(net: Picked, source: Source, directory, name: str) -> str:
    """A TorchScript archive stays one (bench it as a file); a code model's state_dict
    is its ``--weights``."""
    if source.kind == "torchscript":
        file = f"{name}.torchscript.pt"
        torch.jit.save(net.net, str(directory / file))
    else:
        file = "model.pt"
        torch.save(net.net.state_dict(), directory / file)
    return file
