"""A source's verified builds, for the commands that run a model at several precisions
(``tune``, ``synth generate`` and ``synth validate``): each target through the build
path any model takes, kept only where it built and verified."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dlbench.core.errors import UserError


def verified_builds(
    source: str,
    targets: list[str],
    dest: Path,
    say: Callable[[str], None],
    *,
    db: str | None = None,
    ready: dict[str, str] | None = None,
) -> tuple[dict[str, str], list[str]]:
    """({"fp32": source, target: file, ...} for the targets that verified, one line per
    target left out saying why).  A file in ``ready`` (target -> file, verified before)
    is taken as it is; a target this machine or this graph cannot take (a refusal before
    any build) is left out like a build that failed."""
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
            record = build(BuildRequest(source=source, to=target, out=str(out), db=db))
        except UserError as exc:
            why = str(exc)
        else:
            if record["status"] == "ok" and out.is_file():
                files[target] = str(out)
                continue
            why = record.get("error") or record["status"]
        left.append(f"{Path(source).name} --to {target}: {why}")
        say(f"build {Path(source).name} --to {target} left out: {why}")
    return files, left
