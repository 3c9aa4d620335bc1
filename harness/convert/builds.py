"""A source's verified builds, for the commands that run a model at several precisions
(``tune``, ``synth generate`` and ``synth validate``): each target through the build
path any model takes, kept only where it built and verified."""

from __future__ import annotations

import math
from collections.abc import Callable
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
) -> tuple[dict[str, str], list[str]]:
    """({"fp32": source, target: file, ...} for the targets that verified, one line per
    target left out saying why).  A file in ``ready`` (target -> file, verified before)
    is taken as it is; a target this machine or this graph cannot take (a refusal before
    any build) is left out like a build that failed.  Given ``unverified`` (a list), a
    build over its accuracy tolerance whose outputs are finite and of the right shapes is
    kept too, and its line goes there: whoever asks only times it (a speed is a speed
    whatever the calibration's accuracy), and says so.  ``dynamic``: the INT8 mode
    (None: the graph's choice)."""
    from dlbench.harness.convert.build import build
    from dlbench.harness.convert.request import BuildRequest

    files = {"fp32": source}
    left = []
    for target in targets:
        made = (ready or {}).get(target)
        if made and Path(made).is_file():
            files[target] = made
            continue
        out = dest / f"{Path(source).stem}.{target}.onnx"
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
