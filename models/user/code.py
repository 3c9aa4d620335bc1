"""``--model-from``: import the user's code and call it, inside the cell's process.

The callable may build a model of any framework; the frameworks its module
imported are seeded first (``SEED``), so randomly initialized weights are
the same in every cell.  Which framework it is follows from the object it
returns (a ``torch.nn.Module``, a Keras model, a
MindSpore ``nn.Cell``), checked against the frameworks its module imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from dlbench.core.errors import UserError, first_line
from dlbench.models.user import Source


def call(source: Source) -> Any:
    """The object the callable returns; UserError with the import error's first line."""
    target, _, func = source.model_from.rpartition(":")
    flag = f"--model-from {source.model_from}"
    if importlib.util.find_spec("torchvision") is not None:  # timm and transformers import it
        from dlbench.models.user.torchvision_compat import torchvision_importable

        torchvision_importable()
    try:
        if target.endswith(".py"):
            path = Path(target)
            # A real module (its own name in sys.modules) so MindSpore's graph mode can
            # read the network's source, and pickling or inspect work as usual.
            name = f"dlbench_user_{path.stem}"
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            sys.path.insert(0, str(path.parent))
            spec.loader.exec_module(mod)
        else:
            mod = importlib.import_module(target)
    except Exception as exc:  # noqa: BLE001 - the user's code: any error
        raise UserError(f"{flag}: cannot import {target} ({type(exc).__name__}: {first_line(exc)})") from None
    fn = mod
    for part in func.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise UserError(f"{flag}: {target} has no {func!r}")
    if not callable(fn):
        raise UserError(f"{flag}: {func!r} is not callable")
    seed_frameworks(SEED)
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - the user's code: any error is theirs
        raise UserError(
            f"{flag}: calling {func}() failed ({type(exc).__name__}: {first_line(exc)})"
        ) from None


SEED = 0


def seed_frameworks(seed: int) -> None:
    """Seed every framework the user's module imported, before its code builds the model:
    a model initialized at random is then the same in every cell (the reference and the
    export, each benchmark cell), so its verification compares like with like."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)
    if "keras" in sys.modules:
        sys.modules["keras"].utils.set_random_seed(seed)
    if "mindspore" in sys.modules:
        sys.modules["mindspore"].set_seed(seed)


def framework_of(obj: Any, flag: str) -> str:
    """The framework ``obj`` belongs to; UserError when it is no model dlbench runs."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.nn.Module):
        return "pytorch"
    keras = sys.modules.get("keras")
    if keras is not None and isinstance(obj, keras.Model):
        return "tensorflow"
    ms = sys.modules.get("mindspore")
    if ms is not None and isinstance(obj, ms.nn.Cell):
        return "mindspore"
    raise UserError(
        f"{flag}: returned a {type(obj).__module__}.{type(obj).__name__}, not a "
        f"torch.nn.Module, keras.Model or mindspore.nn.Cell"
    )
