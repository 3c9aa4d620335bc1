"""``dlbench synth profile``: the applications' workload, what the generator reproduces.

Each application is profiled (``dlbench profile``'s cell: ONNX Runtime's profiler over
the graph it runs after its own fusions, or the reference's backend's) on every
reference configuration.  Two fp32
references must differ in batch size, which is how a node's batch axis is found
(``units``), and they should differ in what they stress (one thread at batch 1 is
dispatch- and latency-bound; every thread at a larger batch is throughput-bound), so that
a generated network that matches both has the applications' mix of bound kinds, not one
configuration's.  A built reference (``1x1:int8``) profiles each application's build,
so the network also answers to quantization as the set does; a reference on another
engine (``1x1@openvino``) profiles it there, so the network answers to that engine too;
one on a framework (``1x1@pytorch``) runs each application by the name it was exported
from, and each network as its framework version (``runs``).

Per node: its op class, its time on each reference, the unit that stands for it, its
per-sample FLOPs, bytes and arithmetic intensity, and its shape class.  Per application:
its time shares per class on each reference and the counts of the motifs the literature
names (Conv+BN+ReLU, depthwise+pointwise, attention, recurrent cells), counted on the
graph as exported, before a runtime fuses them.  Applications weigh in by their weight,
not by their run time: the score the network predicts is their weighted geometric mean
of speed ratios, in which a 1 ms model counts as much as a 1 s one.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlbench.core.errors import UserError

KIND = "dlbench-synth-workload"
VERSION = 1


@dataclass(frozen=True)
class Reference:
    batch: int
    threads: int | None  # None: every physical core (bench's default)
    # A build target (int8): the applications' builds are profiled there, so the network
    # is fitted to how they respond to it, not only to batch and threads.
    build: str = "fp32"
    # The backend that profiles and times it (None: the ONNX format's own, ONNX Runtime): a
    # second engine's reference fits the network to how the set responds to that engine,
    # where representatives priced on one engine carry that engine's response only.
    backend: str | None = None

    @property
    def label(self) -> str:
        threads = f"{self.threads or 'all'} thread{'s' if self.threads != 1 else ''}"
        built = f", {self.build}" if self.build != "fp32" else ""
        return f"batch {self.batch}, {threads}{built}" + (f", on {self.backend}" if self.backend else "")

    @property
    def text(self) -> str:
        """As ``--reference`` takes it (``parse`` reads it back)."""
        built = f":{self.build}" if self.build != "fp32" else ""
        return f"{self.batch}x{self.threads or 'all'}{built}" + (f"@{self.backend}" if self.backend else "")

    @classmethod
    def parse(cls, text: str) -> Reference:
        """``BATCHxTHREADS[:BUILD][@BACKEND]``: ``1x1``, ``8xall``, ``1x1:int8``, ``1x1@openvino``,
        ``1x1@pytorch``."""
        from dlbench.converters.base import BUILD_TARGETS
        from dlbench.harness.formats import ONNX
        from dlbench.harness.profile.profilers import for_format, profiled_on
        from dlbench.harness.synth.frameworks import profiled_natively

        rest, _, backend = text.partition("@")
        shape, _, build = rest.partition(":")
        batch, _, threads = shape.partition("x")
        try:
            b = int(batch)
            t = None if threads in ("", "all") else int(threads)
        except ValueError:
            raise UserError(
                f"--reference {text}: give BATCHxTHREADS[:BUILD][@BACKEND], e.g. 1x1, 8xall, 1x1:int8 "
                "or 1x1@openvino"
            ) from None
        if b < 1 or (t is not None and t < 1):
            raise UserError(f"--reference {text}: batch and threads must be at least 1")
        if build and build not in BUILD_TARGETS.names():
            raise UserError(
                f"--reference {text}: no build target {build} (known: {', '.join(BUILD_TARGETS.names())})"
            )
        natively = profiled_natively()
        if backend and for_format(ONNX, backend) is None and backend not in natively:
            raise UserError(
                f"--reference {text}: no backend {backend} profiles ONNX files or the network's "
                f"framework version (those that do: {', '.join([*profiled_on(ONNX), *natively])})"
            )
        if backend in natively and build:
            raise UserError(
                f"--reference {text}: {backend} runs the applications by name and the network's "
                "own version, which have no builds; leave :BUILD out"
            )
        return cls(b, t, build or "fp32", backend or None)

    def to_json(self) -> dict[str, Any]:
        return {"batch": self.batch, "threads": self.threads, "build": self.build, "backend": self.backend}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Reference:
        return cls(d["batch"], d["threads"], d.get("build", "fp32"), d.get("backend"))

    @property
    def native(self) -> bool:
        """Whether its backend runs no ONNX file: the applications run there by the names
        they were exported from, a network as its own framework version."""
        from dlbench.harness.backends import get_backend
        from dlbench.harness.formats import ONNX

        return ONNX not in get_backend(self.runs_on).formats

    @property
    def runs_on(self) -> str:
        """The backend's name, the ONNX format's own where none was asked for."""
        from dlbench.harness.formats import ONNX, default_backend

        return str(self.backend or default_backend(ONNX))


def matched(refs) -> list[int]:
    """The references whose graph is the first one's (its build, on its backend): nodes
    match by name across them; a built reference's graph is another, and another
    backend's runs its own fusions of it, known by their class times only."""
    return [i for i, r in enumerate(refs) if (r.build, r.runs_on) == (refs[0].build, refs[0].runs_on)]


def set_ms(apps: list[dict[str, Any]], ref: int) -> float:
    """The applications' node time on reference ``ref``, each run once (unweighted): what a
    run of the whole set costs, the figure a benchmark's run time is held against."""
    return sum(a["node_ms"][ref] for a in apps)


def at_timed(workload: dict[str, Any]) -> dict[str, Any]:
    """The workload in the times bench measures: each application's profile on every
    reference scaled to its timing there (``timed_ms``), its nodes' times and node total,
    its class shares as they were.  A profile is one process a reference, and a process
    reads a whole model's speed up to twice off (a slow spell of the machine meets every
    node of it alike); the median of a few processes in turn moves far less.  A workload
    profiled without timings is returned as it is."""
    apps = workload["applications"]
    if not apps or not all(a.get("timed_ms") for a in apps):
        return workload
    scale = [[t / n if n > 0 else 1.0 for t, n in zip(a["timed_ms"], a["node_ms"])] for a in apps]
    return {
        **workload,
        "applications": [{**a, "node_ms": list(a["timed_ms"])} for a in apps],
        "nodes": [
            {**n, "us": [us * scale[n["app"]][r] for r, us in enumerate(n["us"])]} for n in workload["nodes"]
        ],
    }


def check_references(refs: tuple[Reference, ...]) -> None:
    if refs[0].native:
        raise UserError(
            f"--reference {refs[0].text}: the first reference must run the ONNX files (its nodes "
            f"become the units, and the others are timed against it); put {refs[0].text} after one"
        )
    if len({refs[i].batch for i in matched(refs)}) < 2:
        raise UserError(
            f"--reference: give at least two {refs[0].build} references with different batch sizes "
            "(how each node's batch axis is found)"
        )


def check_named(refs: tuple[Reference, ...], unnamed: list[str]) -> None:
    """A native reference runs every application by name: ``unnamed`` (files) are refused."""
    native = next((r for r in refs if r.native), None)
    if native and unnamed:
        raise UserError(
            f"--reference {native.text}: {native.runs_on} runs the applications by the names they "
            f"were exported from, and {', '.join(unnamed)} has none; give it by name (a zoo model, "
            "hf:..., timm:...) or leave the reference out"
        )


# Batch 8 on one thread as well as on every core: with batch 8 only beside every thread, fits
# met the move to 8xall with units that thread well and batch badly (a network gaining 8 % a
# sample from batch 8 on one thread where the zoo set gained 37 %).  Batch 1 on every thread
# too: a zoo-set network fitted without it missed there alone, 19 to 29 % low on ONNX Runtime
# and OpenVINO (its small instances lose time to a second thread the applications gain
# from); one fitted with it read 11 % low to 1 % high in the same validation.
DEFAULT_REFERENCES = (
    Reference(1, 1),
    Reference(8, 1),
    Reference(1, None),
    Reference(8, None),
    Reference(1, 1, "int8"),
)


def named_in(home: Path, source: str) -> str:
    """``source`` as the JSON file in folder ``home`` names it: relative to that folder,
    so that the workload or description works from any working directory and moves with
    the files beside it (a model by name stays as it is)."""
    if not Path(source).is_file():
        return source
    return os.path.relpath(Path(source).resolve(), Path(home).resolve())


def opened_from(home: Path, source: str) -> str:
    """The file a JSON file in folder ``home`` names, as this process opens it (the other
    side of ``named_in``); a name relative to the working directory, as an older ``synth``
    wrote, is taken where nothing is found beside the JSON."""
    path = Path(source)
    if path.is_absolute() or not (home / path).is_file():
        return source
    return os.path.normpath(home / path)


@dataclass(frozen=True)
class Application:
    source: str  # the ONNX file profiled
    weight: float = 1.0
    # The model by name it was exported from (timm:resnet18): what the native backends run.
    native: str | None = None

    @classmethod
    def parse(cls, text: str) -> Application:
        """``PATH`` or ``PATH=WEIGHT``."""
        path, eq, weight = text.rpartition("=") if "=" in text else (text, "", "1")
        try:
            w = float(weight)
        except ValueError:
            raise UserError(f"{text}: the weight after '=' must be a number") from None
        if not w > 0 or not math.isfinite(w):
            raise UserError(f"{text}: a weight must be positive")
        return cls(path if eq else text, w)


def profile_workload(
    apps: list[Application],
    refs: tuple[Reference, ...] = DEFAULT_REFERENCES,
    *,
    warmup: int = 5,
    iterations: int = 20,
    timeout: float | None = None,
    say: Callable[[str], None] = lambda _: None,
    db: str | None = None,
    home: Path = Path("."),
    timings: int = 3,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every application profiled on every reference, each profile stored (``db``); the
    workload the generator reads.  Each is also timed on every reference in ``timings``
    bench processes, all in turn (``rounds.timed_in_turn``; 0: none), its ``timed_ms``:
    the score is the ratios of those times, as validate measures them, not of the
    profiles' one process a reference (one read vgg16-mini's batch 8 on every core 7.8x
    its batch 1 on one, where validate's cells read 3.9 to 4.1x).  ``options``: backend
    options (bench's -O) every profile and timing runs with, each backend its own; kept in
    the workload, so the generator's profiles of its networks run as these did."""
    from dlbench.core.atomic import scratch
    from dlbench.harness.convert.builds import distinct_stems
    from dlbench.harness.synth.rounds import timed_in_turn
    from dlbench.harness.synth.runs import profile_at, run_at

    check_references(refs)
    if not apps:
        raise UserError("give at least one application")
    # Their builds share a folder and are all timed after the last is made: two files
    # of one name would time the second's build twice.
    names = distinct_stems(a.source for a in apps)
    check_named(refs, [Path(a.source).name for a in apps if not a.native])
    applications, nodes, files = [], [], []
    for index, app in enumerate(apps):
        files.append([run_at(app.source, app.native, ref, home, say, name=names[app.source]) for ref in refs])
        runs = (warmup, iterations, timeout)
        profiles = [profile_at(f, ref, *runs, say, db, options) for f, ref in zip(files[-1], refs)]
        entry, app_nodes = _application(index, app, refs, profiles, names[app.source])
        applications.append(entry)
        nodes.extend(app_nodes)
    if timings:
        say(f"time the applications in {timings} processes a reference, in turn")
        with scratch("dlbench-synth") as tmp:
            timed = timed_in_turn(files, refs, timings, str(Path(tmp) / "timings.sqlite"), timeout, options)
        for entry, ms in zip(applications, timed):
            entry["timed_ms"] = ms
    return {
        "kind": KIND,
        "version": VERSION,
        "references": [r.to_json() for r in refs],
        "options": options or {},
        "applications": applications,
        "nodes": nodes,
    }


def int8_dynamic(source: str) -> bool:
    """Whether ``source``'s INT8 build quantizes dynamically: the choice the build path
    makes when nobody asks (the mode the model declares, else its graph's: recurrent
    layers, attention)."""
    import onnx

    from dlbench.converters.int8_recipe import choose_mode, declared_mode

    model = onnx.load(source, load_external_data=False)
    return choose_mode(model.graph, None, declared_mode(model))[0]


def set_mode(apps: list[dict[str, Any]]) -> bool:
    """The INT8 mode of a network that stands for ``apps``: the one most of their weight
    is quantized in.  A network's graph would choose by its own units (one recurrent unit
    among hundreds of convolutions makes it dynamic), while what it must reproduce is how
    the set responds to its builds: CNNs quantized statically respond nothing like a
    dynamically quantized chain of convolutions."""
    dynamic = sum(a["weight"] for a in apps if app_int8_dynamic(a))
    return dynamic > sum(a["weight"] for a in apps) / 2


def app_int8_dynamic(app: dict[str, Any]) -> bool:
    """An application's INT8 mode as its workload entry records it (profiled before the
    entry had one: read from its graph)."""
    return app["int8_dynamic"] if "int8_dynamic" in app else int8_dynamic(app["source"])


def _application(index: int, app: Application, refs, profiles: list[dict[str, Any]], label: str):
    from dlbench.harness.profile.classes import node_class
    from dlbench.harness.synth.units import motifs, shape_class, unit_of

    same = matched(refs)
    by_name = [{n["node"]: n for n in p["nodes"]} if i in same else {} for i, p in enumerate(profiles)]
    second = next(i for i in same if refs[i].batch != refs[0].batch)
    nodes = []
    for n in profiles[0]["nodes"]:
        other = by_name[second].get(n["node"])
        unit = unit_of(n, other, refs[0].batch, refs[second].batch)
        row: dict[str, Any] = {
            "app": index,
            "node": n["node"],
            "op": n["op"],
            "class": node_class(n),
            "us": [m.get(n["node"], {}).get("us", 0.0) for m in by_name],
            "unit": unit.to_json() if unit else None,
        }
        if unit is not None and unit.batched:
            moved = 4.0 * (math.prod(unit.x) + math.prod(unit.y))
            row.update(
                flops=unit.flops(),
                bytes=moved,
                intensity=unit.flops() / moved if moved else None,
                shape_class=shape_class(unit),
            )
        nodes.append(row)
    entry = {
        "source": app.source,
        "label": label,
        "weight": app.weight,
        "native": app.native,
        "int8_dynamic": int8_dynamic(app.source),
        "node_ms": [p["node_ms_per_run"] for p in profiles],  # the profiler's cost taken off
        "profiled_ms": [p.get("profiled_node_ms_per_run", p["node_ms_per_run"]) for p in profiles],
        "wall_ms": [p["wall_ms_per_run"] for p in profiles],
        "classes": [{c["class"]: c["share"] for c in p["classes"]} for p in profiles],
        "motifs": motifs(app.source),
    }
    return entry, nodes
