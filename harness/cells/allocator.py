"""The memory allocator a cell runs with: a recorded axis, like its threads.

Why it is an axis at all: eager CPU frameworks free and re-allocate their large
activations every iteration.  With glibc's defaults a block above the mmap
threshold (128 KiB, raised dynamically up to 32 MiB) is a fresh ``mmap`` whose
pages fault in again on every iteration, and a free at the top of the heap is
trimmed back to the kernel.  On ResNet-50 in PyTorch at batch 32 (2 cores) that
is the difference between 7.5 and 18 images/s; the cure is an environment
variable, so a benchmark that does not say which allocator ran says little.

The choices, each applied to the cell's environment before the framework loads:

* ``system`` — glibc malloc exactly as shipped: the out-of-the-box row.
* ``tuned`` (default) — glibc malloc told to keep what it freed:
  ``MALLOC_MMAP_THRESHOLD_`` 4 GiB (blocks up to 4 GiB come from the heap and are
  reused; a larger one-off buffer is still mapped, so it cannot pin the heap) and
  ``MALLOC_TRIM_THRESHOLD_`` 64 GiB (the heap top is never given back in
  practice: a cell's working set is its peak RSS anyway, which is recorded).
  Setting either also stops glibc's dynamic threshold from moving under the
  measurement.  Default because the harness reports what the machine can do, as
  its thread defaults do; ``--allocator system`` is one flag away.
* ``jemalloc`` / ``tcmalloc`` — Debian's ``libjemalloc.so.2`` /
  ``libtcmalloc_minimal.so.4`` through ``LD_PRELOAD``, each told to keep freed
  pages as ``tuned`` does (``MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1``;
  ``TCMALLOC_RELEASE_RATE=0``), so that the three rows compare allocators and
  not release policies.  Out of the box both release large blocks eagerly
  (jemalloc purges allocations over 8 MiB at once) and page like ``system``.

Every choice starts from a clean slate: allocator settings inherited from the
parent's environment (``MALLOC_*``, ``TCMALLOC_*``, ``glibc.malloc.*`` in
``GLIBC_TUNABLES``, an allocator library in ``LD_PRELOAD``) are removed, so the
name in the record is what ran.  Other ``LD_PRELOAD`` entries are kept.

Only the standard library here: the launcher and the cell import this module.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig

from dlbench.core.errors import UserError

ALLOCATORS = ("system", "tuned", "jemalloc", "tcmalloc")
DEFAULT_ALLOCATOR = "tuned"
# The cell reads its allocator's name here (the preload check, the kernel-time hint).
MARKER = "DLBENCH_ALLOCATOR"

GIB = 2**30
SETTINGS: dict[str, dict[str, str]] = {
    "system": {},
    "tuned": {"MALLOC_MMAP_THRESHOLD_": str(4 * GIB), "MALLOC_TRIM_THRESHOLD_": str(64 * GIB)},
    "jemalloc": {"MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1"},
    "tcmalloc": {"TCMALLOC_RELEASE_RATE": "0"},
}
# Preloaded libraries: (soname, Debian package that ships it).
LIBRARIES = {
    "jemalloc": ("libjemalloc.so.2", "libjemalloc2"),
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
}

# What counts as an allocator setting: removed from the inherited environment, recorded.
PREFIXES = ("MALLOC_", "TCMALLOC_", "JE_MALLOC_", "MIMALLOC_")
PRELOADED_ALLOCATORS = (
    "libjemalloc",
    "libtcmalloc",
    "libmimalloc",
    "libtbbmalloc",
    "libhoard",
    "libsnmalloc",
)


def check(name: str) -> str:
    """``name`` if it is a known allocator whose library is here; UserError otherwise."""
    if name not in ALLOCATORS:
        raise UserError(f"--allocator must be one of {', '.join(ALLOCATORS)}, got {name!r}")
    if name in LIBRARIES:
        library(name)
    return name


def library(name: str) -> str:
    """The absolute path of the preloaded allocator's library, for this interpreter's ABI."""
    soname, package = LIBRARIES[name]
    path = _find(soname)
    if path is None:
        raise UserError(
            f"--allocator {name}: {soname} not found; install Debian's {package} "
            f"(apt-get install {package}) or choose --allocator tuned"
        )
    return path


@functools.cache
def _find(soname: str) -> str | None:
    """The dynamic linker's cache first, then the usual multiarch directories; a file is
    taken only when its ELF class and machine are this interpreter's (no 32-bit copy)."""
    for path in _ldconfig_paths(soname) + _known_paths(soname):
        if os.path.isfile(path) and _same_abi(path):
            return os.path.realpath(path)
    return None


def _ldconfig_paths(soname: str) -> list[str]:
    tool = shutil.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.access(p, os.X_OK)), None
    )
    if tool is None:
        return []
    try:
        out = subprocess.run([tool, "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [
        line.rsplit("=>", 1)[1].strip()
        for line in out.splitlines()
        if line.strip().startswith(soname + " ") and "=>" in line
    ]


def _known_paths(soname: str) -> list[str]:
    triplet = sysconfig.get_config_var("MULTIARCH") or ""
    dirs = [f"/usr/lib/{triplet}", f"/lib/{triplet}"] if triplet else []
    dirs += ["/usr/lib64", "/lib64", "/usr/lib", "/usr/local/lib"]
    return [os.path.join(d, soname) for d in dirs]


def _elf_id(path: str) -> bytes | None:
    """ELF class, data encoding and machine: what must match for ld.so to preload it."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    return head[4:6] + head[18:20]


def _same_abi(path: str) -> bool:
    return _elf_id(path) is not None and _elf_id(path) == _elf_id(sys.executable)


def _scrub(env: dict[str, str]) -> dict[str, str]:
    """``env`` without inherited allocator settings (other variables untouched)."""
    env = {k: v for k, v in env.items() if not k.startswith(PREFIXES)}
    tunables = [
        t for t in env.get("GLIBC_TUNABLES", "").split(":") if t and not t.startswith("glibc.malloc.")
    ]
    if tunables:
        env["GLIBC_TUNABLES"] = ":".join(tunables)
    else:
        env.pop("GLIBC_TUNABLES", None)
    preload = [
        p
        for p in env.get("LD_PRELOAD", "").replace(" ", ":").split(":")
        if p and not os.path.basename(p).startswith(PRELOADED_ALLOCATORS)
    ]
    if preload:
        env["LD_PRELOAD"] = ":".join(preload)
    else:
        env.pop("LD_PRELOAD", None)
    return env


def apply(env: dict[str, str], name: str) -> dict[str, str]:
    """A copy of ``env`` with allocator ``name`` in force (and nothing inherited)."""
    check(name)
    env = _scrub(env)
    env[MARKER] = name
    env.update(SETTINGS[name])
    if name in LIBRARIES:
        env["LD_PRELOAD"] = ":".join([library(name)] + [p for p in [env.get("LD_PRELOAD")] if p])
    return env


def identity(name: str) -> dict[str, str]:
    """The allocator's entry in a cell's identity (the key a resumed run matches on): none
    for ``system``, because cells stored before ``--allocator`` existed ran the system's
    and must keep their keys."""
    return {} if name == "system" else {"allocator": name}


def in_force(env: dict[str, str] | None = None) -> dict[str, object]:
    """The allocator of an environment, as records keep it: its name and every variable
    that steers an allocator, exactly as the cell received it."""
    env = os.environ if env is None else env
    variables = {
        k: env[k]
        for k in sorted(env)
        if k.startswith(PREFIXES)
        or k == "LD_PRELOAD"
        or (k == "GLIBC_TUNABLES" and "glibc.malloc." in env[k])
    }
    return {"name": env.get(MARKER, "system (not set by dlbench)"), "variables": variables}


def check_loaded() -> None:
    """In the cell: fail if ld.so ignored the preloaded allocator (it only warns), since a
    record saying jemalloc over a glibc run would be a lie."""
    name = os.environ.get(MARKER)
    if name not in LIBRARIES:
        return
    soname = LIBRARIES[name][0].split(".so")[0]
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            if any(
                os.path.basename(line.split()[-1]).startswith(soname + ".so") for line in fh if "/" in line
            ):
                return
    except OSError:
        return  # not Linux: nothing to check against
    raise RuntimeError(
        f"--allocator {name}: LD_PRELOAD={os.environ.get('LD_PRELOAD', '')!r} "
        f"was not loaded into the cell (the dynamic linker ignored it)"
    )


def kernel_hint(name: str | None) -> str:
    """What to try when a cell spends its time in the kernel, given the allocator it had."""
    if name in (None, "system") or str(name).startswith("system"):
        return (
            "likely page faults from the allocator returning freed memory: try "
            "--allocator tuned (or jemalloc)"
        )
    return (
        f"with --allocator {name} already: compare --allocator jemalloc/tcmalloc, and "
        f"look for other system time (I/O, thread spinning, transparent huge pages)"
    )
