"""The settings a tune searches, read from what the backends and build targets declare.

Nothing here lists a setting by hand: a backend option is searched where its declaration
says so (``Option.tune_on``, over its choices or ``tune_values``), inter-op threads where
the backend has an inter-op pool, the allocators whose library is on this machine, the
thread counts up to the usable cores, and the build targets that build for the device and
the backend's formats (``converters.base.BUILD_TARGETS``).  ``--space`` overrides any of
them, so a user (or a test) can narrow the search without a second mechanism.

Every dimension's first value is bench's default: the default point is the first of each,
and the one-factor points (one dimension away from it) say what each setting is worth.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.backends.base import Backend
from dlbench.harness.cells.allocator import ALLOCATORS, DEFAULT_ALLOCATOR
from dlbench.harness.cells.allocator import check as check_allocator
from dlbench.harness.cells.threads import usable_cores

THREADS, INTER_OP, ALLOCATOR, BATCH, BUILD = "threads", "inter_op_threads", "allocator", "batch_size", "build"
COMMON = (THREADS, INTER_OP, ALLOCATOR, BATCH, BUILD)  # every backend's, besides its options
SOURCE = "source"  # the build dimension's value for the file as given
# Dimensions that are not a default someone chose wrongly: the env hint leaves them out.
NOT_DEFAULTS = (BATCH, BUILD)

Point = dict[str, Any]


@dataclass
class Space:
    backend: Backend
    dims: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    def default(self) -> Point:
        return {k: v[0] for k, v in self.dims.items()}

    def size(self) -> int:
        n = 1
        for values in self.dims.values():
            n *= len(values)
        return n

    def one_factor(self) -> list[Point]:
        """The default, then each point one dimension away from it."""
        base = self.default()
        return [base, *self.neighbours(base)]

    def neighbours(self, p: Point) -> list[Point]:
        """Each point one dimension away from ``p``."""
        return [{**p, k: v} for k, values in self.dims.items() for v in values if v != p[k]]

    def sample(self, n: int, seed: int = 0) -> list[Point]:
        """``n`` distinct points: the one-factor points first, then random ones (the whole
        grid when it is small enough)."""
        out = {key(p): p for p in self.one_factor()}
        if len(out) >= n:
            return list(out.values())[:n]
        if self.size() <= n:
            grid = [dict(zip(self.dims, combo)) for combo in itertools.product(*self.dims.values())]
            return list(out.values()) + [p for p in grid if key(p) not in out]
        rng = random.Random(seed)
        while len(out) < n:
            p = {k: rng.choice(v) for k, v in self.dims.items()}
            out.setdefault(key(p), p)
        return list(out.values())


def key(p: Point) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in p.items()))


def thread_counts() -> tuple[int, ...]:
    """bench's default (the usable cores) first, then powers of two below it."""
    cores = usable_cores()
    return (cores, *[t for t in (2**i for i in range(8)) if t < cores][::-1])


def allocators() -> tuple[str, ...]:
    """The default first, then each other allocator whose library is here."""
    out = [DEFAULT_ALLOCATOR]
    for name in ALLOCATORS:
        try:
            check_allocator(name)
        except UserError:
            continue
        out.append(name)
    return tuple(dict.fromkeys(out))


def build_targets(backend: Backend, device: str) -> tuple[str, ...]:
    from dlbench.converters.base import BUILD_TARGETS, build_hop

    return tuple(
        t
        for t in BUILD_TARGETS.names()
        if build_hop(t).device == device and build_hop(t).artifact_format in backend.formats
    )


def declared(
    backend: Backend, device: str, batch_sizes: list[int], builds: list[str] | None, with_builds: bool
) -> Space:
    """The space from the declarations; ``builds`` None: every target that applies."""
    dims: dict[str, tuple[Any, ...]] = {THREADS: thread_counts()}
    if backend.inter_op_pool:
        dims[INTER_OP] = (1, 2)
    dims[ALLOCATOR] = allocators()
    dims[BATCH] = tuple(dict.fromkeys([1, *batch_sizes]))
    targets = build_targets(backend, device) if builds is None else tuple(b for b in builds if b != "none")
    if with_builds and targets:
        dims[BUILD] = (SOURCE, *targets)
    for o in backend.options:
        values = o.searched(device)
        if len(values) > 1:
            dims[o.name] = values
    return Space(backend, dims)


def applying(given: dict[str, list[str]], backend: Backend) -> dict[str, list[str]]:
    """The ``--space`` entries that apply to ``backend``: every common dimension (inter-op
    threads only where it has an inter-op pool, as ``declared`` says), and the options it
    declares (one command line tunes backends whose options differ)."""
    return {
        k: v
        for k, v in given.items()
        if (k in COMMON and (k != INTER_OP or backend.inter_op_pool)) or backend.option(k) is not None
    }


def narrowed(space: Space, given: dict[str, list[str]]) -> Space:
    """``--space`` applied: each named dimension takes exactly the values given, the
    declared default first where it is among them (else the first given stands in for
    it); values are checked as bench checks them."""
    dims = dict(space.dims)
    for name, values in given.items():
        if name in (THREADS, INTER_OP, BATCH):
            try:
                parsed: tuple[Any, ...] = tuple(int(v) for v in values)
            except ValueError:
                raise UserError(f"--space {name}: {values!r}: expected integers") from None
            if min(parsed) < 1:
                raise UserError(f"--space {name}: values must be at least 1")
        elif name == ALLOCATOR:
            parsed = tuple(check_allocator(v) for v in values)
        elif name == BUILD:
            parsed = tuple(values)
        else:
            option = space.backend.option(name)
            if option is None:
                names = [*COMMON, *(o.name for o in space.backend.options)]
                raise UserError(
                    f"--space {name}: not a setting of {space.backend.name}; choose from {', '.join(names)}"
                )
            parsed = tuple(option.parse(space.backend.name, v) for v in values)
        option = space.backend.option(name)
        default = space.dims[name][0] if name in space.dims else option.default if option else None
        # the declared default stays first (the reference point) where it is among them
        dims[name] = tuple(dict.fromkeys(sorted(parsed, key=lambda v: v != default)))
    return Space(space.backend, dims)
