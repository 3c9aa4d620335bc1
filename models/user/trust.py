"""Which model files may run their author's code when loaded, and the user's word that they
may (``--trust-model``, Hugging Face's ``trust_remote_code`` convention).

Benchmarking a model downloaded from the internet must not run code hidden in it.  A
torch.export archive (``.pt2``) is mostly safe data (a JSON graph, raw tensor bytes), but
``torch.export.load`` unpickles some members without restriction:

* sample inputs are tried with ``weights_only=True`` and, when that fails, loaded again
  *without* it (a crafted archive makes the first attempt fail on purpose);
* weights and constants saved with ``use_pickle`` and legacy ``.pt`` members are loaded
  with ``weights_only=False``;
* custom and opaque objects (``custom_obj_*``, ``opaque_obj_*``) are plain pickles.

So before torch sees the file, every pickled member must load under PyTorch's restricted
unpickler (``weights_only=True``: tensors and containers, no arbitrary callables); custom
and opaque objects cannot be checked at all.  A member that fails makes the file need
trust.  A SavedModel is refused the same way when what its signatures reach includes
ops that act outside the run (files written, checkpoints saved, Python called:
``models.user.tensorflow.savedmodel_risks``).  The CLI exports the user's
``--trust-model`` as ``DLBENCH_TRUST_MODEL=1``, so the cells that load the file see the
same word, and each record stores it.
"""

from __future__ import annotations

import io
import json
import os
import zipfile

from dlbench.core.errors import UserError

TRUST_ENV = "DLBENCH_TRUST_MODEL"
FLAG = "--trust-model"


def trusted() -> bool:
    return os.environ.get(TRUST_ENV) == "1"


def _loads_restricted(blob: bytes) -> bool:
    import torch

    try:
        torch.load(io.BytesIO(blob), weights_only=True, map_location="cpu")
    except Exception:  # noqa: BLE001 - any refusal of the restricted unpickler means "unsafe"
        return False
    return True


def export_archive_risks(path: str) -> list[str]:
    """The members of a torch.export archive that could run code when loaded."""
    risks = []
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        members = {n.partition("/")[2]: n for n in names}
        for rel, name in members.items():
            legacy = rel.startswith(("data/weights/", "data/constants/")) and rel.endswith(".pt")
            if (rel.startswith("data/sample_inputs/") or legacy) and not _loads_restricted(z.read(name)):
                risks.append(f"{rel} (a pickle the restricted loader refuses)")
            if not rel.endswith(("_weights_config.json", "_constants_config.json")):
                continue
            folder = rel.rsplit("/", 1)[0]
            for fqn, meta in (json.loads(z.read(name)).get("config") or {}).items():
                stem = str(meta.get("path_name", ""))
                if stem.startswith(("custom_obj", "opaque_obj")):
                    risks.append(f"{fqn} (a pickled {stem.split('_obj')[0]} object)")
                elif meta.get("use_pickle"):
                    blob = z.read(members.get(f"{folder}/{stem}", name))
                    if not _loads_restricted(blob):
                        risks.append(f"{fqn} (a pickle the restricted loader refuses)")
    return risks


def require(label: str, risks: list[str], what: str) -> None:
    """Refuse ``label`` in one line unless the user trusts it (or nothing is at risk);
    ``what`` says what the ``risks`` are."""
    if not risks or trusted():
        return
    shown = ", ".join(risks[:3]) + (f" and {len(risks) - 3} more" if len(risks) > 3 else "")
    raise UserError(
        f"{label}: {what}: {shown}; dlbench loads it only with {FLAG} (give it only for files you trust)"
    )
