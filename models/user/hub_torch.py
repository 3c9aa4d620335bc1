"""timm, torchvision and Hugging Face models built by name, in the cell (imports torch).

Each builder seeds the frameworks first, as ``--model-from`` code is (the reference
and every converted copy then start from the same random weights), and returns
the network in eval mode and what the probe must report
beside its framework: its inputs (the library's own input size, so no
``--shape`` is needed), the value ranges of token inputs, and where its weights
came from.  ``HF_HUB_OFFLINE`` is set before any library is imported: a
weight that is not in a local cache is never fetched, the network keeps its
random initialization and the record says so.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import torch

from dlbench.core.errors import UserError, first_line
from dlbench.models.user import Source
from dlbench.models.user.code import SEED, seed_frameworks
from dlbench.models.user.hub import RANDOM, hub_of
from dlbench.models.user.torchvision_compat import torchvision_importable

# The sequence length a text model is sized at unless --shape says otherwise: BERT's
# benchmarks' usual 128, or the model's own limit when shorter.
SEQUENCE = 128


def build(source: Source) -> tuple[Any, dict[str, Any]]:
    """(model, facts): facts hold ``inputs``, ``example_shapes``, ``ranges``, ``notes``."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    hub, name = hub_of(source)
    torchvision_importable()  # timm imports it, and transformers does when it is there
    if hub.prefix == "hf":
        return _hf(source, name)
    if hub.prefix == "timm":
        model, size, weights = _timm(source, name)
    else:
        model, size, weights = _torchvision(source, name)
    inputs = [{"name": "pixel_values", "dtype": "float32", "shape": [None, *size]}]
    return model.eval(), {"inputs": inputs, "weights": weights, "notes": []}


def _close(name: str, known: list[str]) -> str:
    near = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    return f" (did you mean {', '.join(near)}?)" if near else ""


def _timm(source: Source, name: str) -> tuple[Any, list[int], str]:
    import timm

    base = name.partition(".")[0]  # a pretrained tag (resnet50.a1_in1k) names weights
    if not timm.is_model(base):
        raise UserError(
            f"{source.label}: timm {timm.__version__} has no model {base!r}{_close(base, timm.list_models())}"
        )
    seed_frameworks(SEED)
    model = timm.create_model(name, pretrained=False)
    weights = RANDOM
    cached = _hf_cached(model.pretrained_cfg.get("hf_hub_id"), ("model.safetensors", "pytorch_model.bin"))
    if cached:
        model = timm.create_model(name, pretrained=True)
        weights = f"pretrained, from the local Hugging Face cache ({cached})"
    size = list(model.pretrained_cfg.get("input_size") or (3, 224, 224))
    return model, size, weights


def _hf_cached(repo: str | None, files: tuple[str, ...]) -> str | None:
    if not repo:
        return None
    from huggingface_hub import try_to_load_from_cache

    for f in files:
        hit = try_to_load_from_cache(repo, f)
        if isinstance(hit, str):
            return hit
    return None


def _torchvision(source: Source, name: str) -> tuple[Any, list[int], str]:
    import torchvision

    models = torchvision.models
    image = set(models.list_models(module=models)) | set(models.list_models(module=models.segmentation))
    if name not in image:
        known = models.list_models()
        why = (
            "detection, video and optical-flow models take inputs or ops dlbench does not plan here"
            if name in known
            else f"torchvision {torchvision.__version__} has no model {name!r}{_close(name, known)}"
        )
        raise UserError(f"{source.label}: {why}; image classification and segmentation models run")
    default = models.get_model_weights(name).DEFAULT
    transform = default.transforms()
    crop = getattr(transform, "crop_size", None) or getattr(transform, "resize_size", None)
    side = int(crop[0]) if crop else 224
    local = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(default.url)
    seed_frameworks(SEED)
    if local.is_file():
        return models.get_model(name, weights="DEFAULT"), [3, side, side], f"pretrained ({default}, {local})"
    return models.get_model(name, weights=None), [3, side, side], RANDOM


class HFModule(torch.nn.Module):
    """A transformers model called with its inputs by position, as every dlbench path calls
    a model, returning its tensor outputs by name (``last_hidden_state``...)."""

    def __init__(self, model: Any, names: list[str]):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *xs: torch.Tensor) -> dict[str, torch.Tensor]:
        out = self.model(**dict(zip(self.names, xs)))
        return {k: v for k, v in out.items() if isinstance(v, torch.Tensor)}


def _hf(source: Source, name: str) -> tuple[Any, dict[str, Any]]:
    import transformers
    from transformers import AutoConfig, AutoModel

    from dlbench.models.user import trust

    target = source.path or name
    where = f"{source.label}: "
    try:
        config = AutoConfig.from_pretrained(target, local_files_only=True, trust_remote_code=trust.trusted())
    except (OSError, ValueError) as exc:
        text = first_line(exc)
        if "trust_remote_code" in text:
            code = ["custom modelling code (its auto_map)"]
            trust.require(source.label, code, "its config names code it ships")
        if source.path is None:
            raise UserError(
                f"{where}no local copy (not a directory, and not in the local Hugging Face cache; "
                f"dlbench downloads nothing: fetch it first, or give the directory)"
            ) from None
        raise UserError(f"{where}transformers cannot read its config ({text})") from None
    config.use_cache = False  # a benchmark of one forward pass: no key/value cache output
    weights = _hf_weights(source.path, name)
    seed_frameworks(SEED)
    try:
        if weights:
            model = AutoModel.from_pretrained(target, config=config, local_files_only=True)
        else:
            model = AutoModel.from_config(config)
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(
            f"{where}transformers {transformers.__version__} cannot build it ({first_line(exc)})"
        ) from None
    notes = []
    if getattr(config, "is_encoder_decoder", False) and hasattr(model, "get_encoder"):
        model = model.get_encoder()
        notes.append("an encoder-decoder model: its encoder is what runs (the decoder steps per token)")
    inputs, examples, ranges = _hf_inputs(source, model, config)
    wrapped = HFModule(model, [i["name"] for i in inputs]).eval()
    facts = {
        "inputs": inputs,
        "example_shapes": examples,
        "ranges": ranges,
        "weights": f"from {weights}" if weights else RANDOM,
        "notes": notes,
    }
    return wrapped, facts


def _hf_weights(directory: str | None, repo: str) -> str | None:
    files = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
    if directory:
        hits = [Path(directory) / f for f in files if (Path(directory) / f).is_file()]
        return str(hits[0]) if hits else None
    return _hf_cached(repo, files)


def _hf_inputs(source: Source, model: Any, config: Any):
    """Inputs from the model's main input: token ids (with a mask of ones), an image or
    audio features, at the sizes its config gives; the sequence stays dynamic."""
    main = getattr(model, "main_input_name", "input_ids")
    if main == "input_ids":
        limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
        seq = min(SEQUENCE, int(limit)) if limit else SEQUENCE
        dims: list[Any] = [None, "sequence"]
        inputs = [
            {"name": "input_ids", "dtype": "int64", "shape": dims},
            {"name": "attention_mask", "dtype": "int64", "shape": dims},
        ]
        examples = {"input_ids": [1, seq], "attention_mask": [1, seq]}
        return inputs, examples, {"input_ids": [0, int(config.vocab_size)]}
    if main == "pixel_values":
        side = config.image_size
        h, w = (side, side) if isinstance(side, int) else side[:2]
        channels = getattr(config, "num_channels", 3)
        return [{"name": main, "dtype": "float32", "shape": [None, channels, h, w]}], {}, {}
    if main == "input_features":  # Whisper's log-mel frames: twice its encoder positions
        frames = 2 * int(config.max_source_positions)
        return [{"name": main, "dtype": "float32", "shape": [None, config.num_mel_bins, frames]}], {}, {}
    raise UserError(
        f"{source.label}: its main input is {main!r}; dlbench sizes token ids, images "
        f"(pixel_values) and audio features (input_features) here"
    )
