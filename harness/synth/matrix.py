"""The matrix of ``dlbench synth validate``: its configurations, and every artifact timed on
each through bench's own cells.

Each configuration (backend x build x batch x threads x allocator x library environment)
runs every application, the synthetic networks and the baselines' networks; the builds
(INT8, FP16) are made and verified once for all of them first.  The rounds run the matrix
in turn forwards and backwards, a predictor's networks taking turns with the applications'
processes (``synth.rounds``), so a drift of the machine lands on every artifact alike.  What
the figures predict, and how well, is ``synth.validate``'s.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Config:
    backend: str
    build: str  # fp32, or a build target (int8, fp16)
    batch: int
    threads: int
    allocator: str
    env: str  # a --with spec, "" for the installed packages

    @property
    def label(self) -> str:
        env = f" {self.env}" if self.env else ""
        return f"{self.backend} {self.build} b{self.batch} {self.threads}t {self.allocator}{env}"


def backend_of(label: str) -> str:
    """The backend of a configuration's ``label``, as the validation's records key them."""
    return label.split(" ", 1)[0]


@dataclass
class Matrix:
    backends: list[str]
    builds: list[str]
    batch_sizes: list[int]
    threads: list[int]
    allocators: list[str]
    envs: list[str]
    options: dict[str, Any] = field(default_factory=dict)  # each backend's, bench's -O

    def configs(self, takes_onnx: Callable[[str], bool] = lambda _: True) -> list[Config]:
        """Every configuration; a native backend (``takes_onnx`` false) runs fp32 only: the
        builds are ONNX files."""
        out = []
        for backend in self.backends:
            builds = self.builds if takes_onnx(backend) else ["fp32"]
            axes = ([backend], builds, self.batch_sizes, self.threads, self.allocators, self.envs)
            out += [Config(*c) for c in itertools.product(*axes)]
        return out


def takes_onnx(backend: str) -> bool:
    from dlbench.harness.backends import get_backend
    from dlbench.harness.formats import ONNX

    return ONNX in get_backend(backend).formats


def measure(
    apps: dict[str, str | None],
    synth: list[str],
    natives: dict[str, dict[str, str]],
    matrix: Matrix,
    workdir: Path,
    *,
    min_duration: float = 0.5,
    say: Callable[[str], None] = lambda _: None,
    db: str | None = None,
    ready: dict[str, dict[str, str]] | None = None,
    modes: dict[str, bool] | None = None,
    cells: dict[str, list[str]] | None = None,
    rounds: int = 1,
    raw: dict[str, dict[str, list[float]]] | None = None,
    processes: dict[str, int] | None = None,
) -> tuple[dict[str, dict[str, float]], list[str], list[str]]:
    """{config label: {application or network (its ONNX file): samples/s}} over the
    matrix, what was left out (builds that failed or gave NaN, the applications with no
    native form for a native backend, cells a backend refused), and the builds timed
    though over their accuracy tolerance: what is predicted is speed, and an INT8 build
    a calibration left a few per cent off runs the kernels a better one would, so a
    configuration keeps them.  ``apps`` maps each
    application's ONNX file to the model by name it came from (None: a file); ``synth``
    the synthetic networks' files; ``natives`` the framework versions of the generated
    networks (the synthetic ones, the generated baselines) by their ONNX file and native
    backend; ``ready`` builds already made and verified (the networks', by generate),
    which are not made again; ``modes``
    the generated networks' INT8 modes (their applications', not their graphs' choice);
    ``cells`` gathers the timed cells by status ("ok", "unstable": bench's spread test),
    each as "configuration: file" (once per process and round), so the output can say
    how much noise its figures carry; ``rounds`` times the matrix runs (``synth.rounds``:
    each cell's figure its rounds' median), ``raw`` gathers every round's figure;
    ``processes`` the predictors' networks (by source) and the processes each runs a
    cell in, interleaved among the other artifacts' (``synth.rounds.interleaved``), a
    round's figure their median."""
    from dlbench.harness.backends import get_backend
    from dlbench.harness.bench.execute import run_bench
    from dlbench.harness.bench.request import BenchRequest
    from dlbench.harness.synth.frameworks import VERSIONS, width
    from dlbench.harness.synth.rounds import in_order, interleaved, medians, ordered, stop_rule

    times = processes or {}

    onnx_builds = [b for b in matrix.builds if b != "fp32"] if any(map(takes_onnx, matrix.backends)) else []
    generated = [*synth, *(n for n in natives if n not in synth)]
    unverified: list[str] = []
    widths: dict[str, int] = {}  # the generated networks', where a native backend runs them
    built, left = build_all([*apps, *generated], onnx_builds, workdir, say, ready, unverified, modes)
    if not all(map(takes_onnx, matrix.backends)):
        from dlbench.harness.usermodel import probe_files

        probe_files([f for by_backend in natives.values() for f in by_backend.values()])
        # A generated network's framework version records no input shape in every format,
        # and each has its own width: read once, each of its processes is given it.
        widths = {s: width(s) for s in generated if natives.get(s)}
    rule = stop_rule(min_duration)
    # Each backend's own of the matrix's options: bench refuses one its backend lacks.
    own = {b: get_backend(b).own_options(matrix.options) for b in matrix.backends}
    # Every block of the matrix (backend x build x allocator x environment) first, each
    # its artifacts' processes in the order they run, then the rounds over them.
    Step = tuple[str, str, dict[str, tuple[int, ...]]]  # file, its source, its input shapes
    blocks: list[tuple[str, str, str, str, list[Step]]] = []
    for backend in matrix.backends:
        onnx = takes_onnx(backend)
        if not onnx:
            left += [f"{Path(a).name} on {backend}: not a model by name" for a, n in apps.items() if not n]
        name = VERSIONS[backend].shape_input if not onnx else None
        for build, allocator, env in itertools.product(
            matrix.builds if onnx else ["fp32"], matrix.allocators, matrix.envs
        ):
            if onnx:
                files = {a: built[a][build] for a in [*apps, *generated] if build in built[a]}
            else:
                files = {a: n for a, n in apps.items() if n}
                files.update({s: natives[s][backend] for s in generated if backend in natives.get(s, {})})
            steps: list[Step] = []
            for source in interleaved(
                [a for a in files if a not in times], {a: times[a] for a in files if a in times}
            ):
                shape: dict[str, tuple[int, ...]] = (
                    {name: (1, widths[source])} if name and source in generated else {}
                )
                steps.append((files[source], source, shape))
            if steps:
                blocks.append((backend, build, allocator, env, steps))
    got: dict[str, dict[str, list[float]]] = raw if raw is not None else {}
    for number, order in enumerate(ordered(blocks, rounds), 1):
        figures: dict[str, dict[str, list[float]]] = {}  # this round's, every process
        for backend, build, allocator, env, steps in order:
            where = f"{backend}, {build}, allocator {allocator}{', ' + env if env else ''}"
            say(
                f"bench {len(steps)} processes a cell on {where}"
                + (f" (round {number} of {rounds})" if rounds > 1 else "")
            )
            for file, source, shapes in in_order(steps, number):
                # Bench runs a request's cells by batch, then threads: a round that runs
                # backwards does so within each step too.
                req = BenchRequest(
                    artifacts=[file],
                    backends=[backend],
                    batch_sizes=in_order(matrix.batch_sizes, number),
                    threads=in_order(matrix.threads, number),
                    allocator=allocator,
                    with_specs=[env] if env else [],
                    rule=rule,
                    shapes=shapes,
                    db=db,
                    options=own[backend],
                )
                refused: list[str] = []
                records = run_bench(req, show_progress=False, refusals=refused)
                left += [x for x in refused if x not in left]  # each round refuses alike
                for r in records:
                    if r["status"] not in ("ok", "unstable") or not r.get("throughput_sps"):
                        # Its configurations lose it (a crash, a hang): so the output says.
                        why = failure_line(file, backend, r)
                        left += [why] if why not in left else []
                        continue
                    config = Config(backend, build, r["batch_size"], r["intra_op_threads"], allocator, env)
                    figures.setdefault(config.label, {}).setdefault(source, []).append(r["throughput_sps"])
                    if cells is not None:
                        cells.setdefault(r["status"], []).append(f"{config.label}: {Path(source).name}")
        for label, by_source in medians(figures).items():
            for source, figure in by_source.items():
                got.setdefault(label, {}).setdefault(source, []).append(figure)
    results = medians(got)
    return results, left, unverified


def failure_line(file: str, backend: str, record: dict[str, Any]) -> str:
    """A failed cell as "Left out" lists it: one line, where an engine's message may run
    over several, blank ones among them (OpenVINO's does)."""
    said = " ".join((record.get("error") or record["status"]).split())
    return f"{Path(file).name} on {backend}: {said}"


def build_all(
    sources: list[str],
    targets: list[str],
    workdir: Path,
    say,
    ready: dict[str, dict[str, str]] | None = None,
    unverified: list[str] | None = None,
    modes: dict[str, bool] | None = None,
) -> tuple[dict[str, dict[str, str]], list[str]]:
    """Each source's verified builds ({"fp32": itself, target: path}); a build that failed
    or did not verify is absent, and the configurations that need it lose that source.
    A build in ``ready`` (source -> target -> file, verified before) is taken as it is;
    with ``unverified``, builds over tolerance are kept and listed there; ``modes`` the
    INT8 mode of a source whose graph should not choose it (a generated network's)."""
    from dlbench.harness.convert.builds import distinct_stems, verified_builds

    out: dict[str, dict[str, str]] = {}
    failed: list[str] = []
    names = distinct_stems(sources)
    for source in sources:
        out[source], left = verified_builds(
            source,
            targets,
            workdir,
            say,
            ready=(ready or {}).get(source),
            unverified=unverified,
            dynamic=(modes or {}).get(source),
            name=names[source],
        )
        failed += left
    return out, failed
