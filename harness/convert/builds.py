"""A source's verified builds, for the commands that run a model at several precisions
(``tune``, ``synth generate`` and ``synth validate``): each target through the build
path any model takes, kept only where it built and verified."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from dlbench.core.errors import UserError


def verified_builds(
    source: str,
    targets: list[str],
    dest: Path,
    say: Callable[[str], None],
    *,
    db: str | None = None,
    ready: dict[str, str] | None = None,
    unverified: list[str] | None = None,
    dynamic: bool | None = None,
    name: str | None = None,
) -> tuple[dict[str, str], list[str]]:
    """({"fp32": source, target: file, ...} for the targets that verified, one line per
    target left out saying why).  A file in ``ready`` (target -> file, verified before)
    is taken as it is; a target this machine or this graph cannot take (a refusal before
    any build) is left out like a build that failed.  Given ``unverified`` (a list), a
    build over its accuracy tolerance whose outputs are finite and of the right shapes is
    kept too, and its line goes there: whoever asks only times it (a speed is a speed
    whatever the calibration's accuracy), and says so.  ``dynamic``: the INT8 mode
    (None: the graph's choice); ``name`` the builds' file stem (the source's by default:
    sources sharing a folder take ``distinct_stems``)."""
    from dlbench.harness.convert.build import build
    from dlbench.harness.convert.request import BuildRequest

    files = {"fp32": source}
    left = []
    for target in targets:
        made = (ready or {}).get(target)
        if made and Path(made).is_file():
            files[target] = made
            continue
        out = build_path(dest, source, target, name)
        say(f"build {Path(source).name} --to {target}")
        try:
            options = with_mode(target, dynamic)
            record = build(BuildRequest(source=source, to=target, out=str(out), db=db, options=options))
        except UserError as exc:
            why = str(exc)
        else:
            if record["status"] == "ok" and out.is_file():
                files[target] = str(out)
                continue
            why = record.get("error") or record["status"]
            if unverified is not None and _timeable(record) and out.is_file():
                files[target] = str(out)
                unverified.append(f"{Path(source).name} --to {target}: {why}")
                say(f"build {Path(source).name} --to {target} timed, not verified: {why}")
                continue
        left.append(f"{Path(source).name} --to {target}: {why}")
        say(f"build {Path(source).name} --to {target} left out: {why}")
    return files, left


def build_path(folder: Path, source: str, target: str, name: str | None = None) -> Path:
    """Where ``source``'s build for ``target`` is written: ``<name>.<target>.onnx``, by the
    source's stem unless ``name`` (``distinct_stems``) tells it from another's."""
    return folder / f"{name or Path(source).stem}.{target}.onnx"


def distinct_stems(sources: Iterable[str]) -> dict[str, str]:
    """Each source's file stem, told apart where two files share one (every Hugging Face
    export is a ``model.onnx``): their builds are written side by side in one folder by
    these names, and each is shown by its own.  Sharers take their folder's name before
    the stem (``bert-model``), then a number where that is shared too."""
    paths = list(dict.fromkeys(sources))
    stems = [Path(p).stem for p in paths]
    names = [
        f"{Path(p).resolve().parent.name}-{s}" if stems.count(s) > 1 else s for p, s in zip(paths, stems)
    ]
    taken: set[str] = set()
    out = {}
    for path, name in zip(paths, names):
        unique, n = name, 1
        while unique in taken:
            n += 1
            unique = f"{name}-{n}"
        taken.add(unique)
        out[path] = unique
    return out


def _timeable(record: dict[str, Any]) -> bool:
    """Built and run, only less accurate than its tolerance: every output finite (a NaN or
    Inf takes other code paths, and its speed is no build's) and of the right shape."""
    outputs = record["metrics"].get("outputs") or {}
    return (
        record["status"] == "unverified"
        and bool(outputs)
        and all(math.isfinite(o["max_abs"]) for o in outputs.values())
    )


def with_mode(target: str, dynamic: bool | None) -> Any:
    """Build options with the INT8 mode set where ``target`` reads it (the build refuses a
    mode given to a target that has none, --to fp16)."""
    from dataclasses import replace

    from dlbench.converters.base import BuildOptions, option_targets

    takes = target in option_targets().get("dynamic", ())
    return replace(BuildOptions(), dynamic=dynamic if takes else None)
