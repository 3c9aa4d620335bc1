"""``--with PACKAGE==VERSION``: run cells against another version of one package.

An environment is an overlay: ``uv pip install --target DIR PACKAGE==VERSION``
puts that version and its dependencies in a directory of its own, and a
cell run with ``PYTHONPATH=DIR`` imports them ahead of the installed ones,
while dlbench and everything the version does not replace come from the
project's environment.  Why not a whole new virtualenv: it would fetch and
unpack every framework again (gigabytes) to change one package; the overlay
costs the package alone, and the cell's record lists the package set it
actually imported, so what shadowed what is never a guess.

Its dependencies are pinned to the versions installed here where the
version allows it (uv's ``--constraint`` with this environment's package set),
so that the package is the only thing that differs; when it needs others,
uv resolves them afresh and the overlay's ``dlbench-env.json`` says why.

Overlays are cached under ``$DLBENCH_ENV_CACHE`` (default
``~/.cache/dlbench/envs``), one directory per spec and Python version, made
in a temporary directory and renamed when complete, so an interrupted
install is never reused.  uv reads its own index settings (``UV_INDEX_URL``,
``UV_FIND_LINKS``, ``UV_NO_INDEX``, ...); pip's (``PIP_INDEX_URL``,
``PIP_EXTRA_INDEX_URL``, ``PIP_FIND_LINKS``, ``PIP_CERT``) are passed on
where uv's are unset, so the registries pip reaches are the ones uv reaches.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from dlbench.core.errors import UserError
from dlbench.core.flags import Flag

SPEC = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")
INSTALL_TIMEOUT_S = 1800
INFO = "dlbench-env.json"
_FROM_PIP = (
    ("PIP_INDEX_URL", "UV_INDEX_URL"),
    ("PIP_EXTRA_INDEX_URL", "UV_EXTRA_INDEX_URL"),
    ("PIP_FIND_LINKS", "UV_FIND_LINKS"),
    ("PIP_CERT", "SSL_CERT_FILE"),
)


def with_flag(what: str = "cells") -> Flag:
    """``--with PACKAGE==VERSION``, the library-version axis, said alike by every command."""
    return Flag(
        ("--with",),
        many=True,
        metavar="PACKAGE==VERSION",
        help=f"run the {what} with this version of a package instead of the installed "
        f"one (an environment made once with uv and cached); repeat: each is a value of the axis",
    )


def _name(spec: str) -> str:
    return _normal(SPEC.match(spec)[1])


def check_specs(specs: list[str]) -> None:
    for spec in specs:
        if not SPEC.match(spec):
            raise UserError(
                f"--with {spec!r}: expected PACKAGE==VERSION (an exact version), e.g. --with mindspore==2.8.0"
            )
    if len(set(specs)) != len(specs):
        raise UserError("--with: the same PACKAGE==VERSION was given twice")


def provides(specs: list[str], distribution: str) -> bool:
    return any(_name(s) == _normal(distribution) for s in specs)


def cache_root() -> Path:
    return Path(os.environ.get("DLBENCH_ENV_CACHE") or Path.home() / ".cache" / "dlbench" / "envs")


def location(spec: str) -> Path:
    tag = f"py{sys.version_info.major}{sys.version_info.minor}"
    return cache_root() / f"{re.sub(r'[^A-Za-z0-9.+_-]', '_', spec)}-{tag}"


def uv() -> str | None:
    here = Path(sys.executable).parent / "uv"
    return str(here) if here.is_file() else shutil.which("uv")


def _uv_env() -> dict[str, str]:
    env = dict(os.environ)
    for pip_var, uv_var in _FROM_PIP:
        if env.get(pip_var) and not env.get(uv_var):
            env[uv_var] = env[pip_var]
    return env


def prepare(spec: str) -> tuple[Path | None, str | None]:
    """(the overlay directory, None), made once and cached; or (None, why it cannot be had:
    uv's own reason), which is that cell's failure, not the sweep's."""
    target = location(spec)
    if (target / ".complete").is_file():
        return target, None
    exe = uv()
    if exe is None:
        return None, f"--with {spec}: uv is not installed (pip install uv; make install has it)"
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    pins = tmp / "installed-constraints.txt"
    pins.write_text("\n".join(_installed_except(_name(spec))) + "\n", encoding="utf-8")
    cmd = [exe, "pip", "install", "--quiet", "--target", str(tmp), "--python", sys.executable]
    why = _uv(cmd + ["--constraint", str(pins), spec])
    resolution = {"spec": spec, "dependencies": "pinned to the installed versions"}
    if why is not None:
        why_fresh = _uv(cmd + [spec])
        if why_fresh is not None:
            shutil.rmtree(tmp, ignore_errors=True)
            return None, f"--with {spec}: cannot install: {why_fresh}"
        resolution["dependencies"] = f"resolved afresh: with the installed versions, {why}"
    pins.unlink()
    (tmp / INFO).write_text(json.dumps(resolution) + "\n", encoding="utf-8")
    (tmp / ".complete").write_text(" ".join(cmd + [spec]) + "\n", encoding="utf-8")
    try:
        tmp.rename(target)
    except OSError:  # another process finished the same overlay first
        shutil.rmtree(tmp, ignore_errors=True)
    return target, None


def _uv(cmd: list[str]) -> str | None:
    """None when uv installed, else its reason in one line."""
    try:
        proc = subprocess.run(cmd, env=_uv_env(), capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"uv did not finish in {INSTALL_TIMEOUT_S} s"
    if proc.returncode == 0:
        return None
    lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
    return " ".join(lines[-4:]) or f"uv exit status {proc.returncode}"


def _installed_except(name: str) -> list[str]:
    """This environment's package set as constraints, less the package being replaced."""
    return [p for p in imported_packages() if _normal(p.partition("==")[0]) != name]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def describe(directory: Path | None) -> dict | None:
    """What an overlay holds and how its dependencies were resolved (for the record)."""
    if directory is None or not (directory / INFO).is_file():
        return None
    return json.loads((directory / INFO).read_text(encoding="utf-8"))


def imported_packages() -> list[str]:
    """Name==version of what this process imports: the first of each name on sys.path,
    as the import system picks it (an overlay's version shadows the installed one)."""
    from importlib import metadata

    seen: dict[str, str] = {}
    for d in metadata.distributions():
        name = d.metadata["Name"]
        if name:
            seen.setdefault(_normal(name), f"{name}=={d.version}")
    return sorted(seen.values())


def record_context(spec: str, packages: list[str] | None) -> dict:
    """What a cell's record says of its environment: the --with spec (None: the installed
    packages), how the overlay's dependencies were resolved, the package set it imported."""
    return {
        "with": spec or None,
        "packages": packages,
        "with_resolution": describe(location(spec)) if spec else None,
    }


def environment(directory: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The variables a cell gets to import from the overlay first."""
    base = os.environ if base is None else base
    paths = [str(directory)] + [p for p in base.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"PYTHONPATH": os.pathsep.join(paths)}
