"""``dlbench synth validate``: do the synthetic networks' speed ratios predict the applications'?

Every configuration of the matrix (backend x build x batch x threads x allocator x
library environment) runs every application and the synthetic networks through bench's
own cells.  The applications' score on a configuration is the weighted geometric mean of
their throughputs, each divided by its throughput on the baseline configuration (the
matrix's first); a predictor's score is the same mean over its own artifacts (the
synthetic benchmark's networks by the weight of the applications each stands for).  Relative accuracy
across changes is what is judged, not absolute time (the lesson of the synthetic-proxy
literature):

* Spearman's rank correlation between predicted and actual scores, over all configurations;
* the median and p90 of |predicted / actual - 1|;
* pairwise "which configuration is faster" agreement, counted only over pairs whose
  actual scores differ by more than the noise floor (``dlbench compare``'s);
* the same rank correlation on each backend family held out of the generation (the
  network was fitted to ONNX Runtime's profile; OpenVINO's configurations never were).

Beside the synthetic networks, the baselines it must beat are scored the same way: each
application alone, and the best two-application subset (chosen with hindsight, so an
upper bound on what picking two models could do).  The score is derived, in MLPerf's
sense, and every report says so.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlbench.harness.stats import percentile

DERIVED = (
    "Derived score (MLPerf's sense): a prediction of the applications' weighted geometric-mean "
    "speed ratio, not a measurement of any application."
)


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


@dataclass
class Matrix:
    backends: list[str]
    builds: list[str]
    batch_sizes: list[int]
    threads: list[int]
    allocators: list[str]
    envs: list[str]

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
                )
                refused: list[str] = []
                records = run_bench(req, show_progress=False, refusals=refused)
                left += [x for x in refused if x not in left]  # each round refuses alike
                for r in records:
                    if r["status"] not in ("ok", "unstable") or not r.get("throughput_sps"):
                        # Its configurations lose it (a crash, a hang): so the output says.
                        why = f"{Path(file).name} on {backend}: {r.get('error') or r['status']}"
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


def complete(results: dict[str, dict[str, float]], artifacts: list[str]) -> list[str]:
    """The configurations on which every one of ``artifacts`` ran."""
    return [c for c, got in results.items() if all(a in got for a in artifacts)]


def scores(
    results: dict[str, dict[str, float]],
    apps: dict[str, float],
    predictors: dict[str, dict[str, float]],
    among: list[str] | None = None,
):
    """The applications' score and each predictor's on every configuration (of ``among``,
    when given) where all the artifacts they need ran, each relative to the first such
    configuration.  A predictor of several artifacts (the best pair, the micro cells) is
    their geometric mean, each by the weight the predictor gives it."""
    configs = [c for c, got in results.items() if all(a in got for a in apps) and c in (among or results)]
    configs = [c for c in configs if all(a in results[c] for need in predictors.values() for a in need)]
    if len(configs) < 2:
        return [], {}, {}
    base = configs[0]

    def mean(config: str, members: dict[str, float]) -> float:
        total = sum(members.values())
        logs = sum(w * math.log(results[config][a] / results[base][a]) for a, w in members.items())
        return math.exp(logs / total)

    actual = {c: mean(c, apps) for c in configs}
    predicted = {name: {c: mean(c, need) for c in configs} for name, need in predictors.items()}
    return configs, actual, predicted


def spearman(x: list[float], y: list[float]) -> float | None:
    if len(x) < 3:
        return None

    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r

    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sd = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return cov / sd if sd else None


def judge(
    configs: list[str], actual: dict[str, float], predicted: dict[str, float], floor: float
) -> dict[str, Any]:
    """One predictor's accuracy over the configurations (see the module's docstring)."""
    errors = sorted(abs(predicted[c] / actual[c] - 1) for c in configs)
    pairs = agree = 0
    for a, b in itertools.combinations(configs, 2):
        if abs(actual[a] / actual[b] - 1) > floor:
            pairs += 1
            agree += (actual[a] > actual[b]) == (predicted[a] > predicted[b])
    return {
        "spearman": spearman([actual[c] for c in configs], [predicted[c] for c in configs]),
        "median_error": statistics.median(errors),
        "p90_error": percentile(errors, 90),  # interpolated, as every p90 dlbench reports
        "pairwise_agreement": agree / pairs if pairs else None,
        "pairs_beyond_noise": pairs,
    }


def validate(
    results: dict[str, dict[str, float]],
    apps: dict[str, float],
    synth: dict[str, float],
    generated_on: set[str],
    floor: float,
    baselines: tuple[str, ...] = (),
    generated: dict[str, dict[str, float]] | None = None,
) -> dict[str, Any]:
    """The synthetic networks (file -> weight) and the baselines, judged on the measured matrix:
    ``baselines`` are models outside the set (ResNet-50), each a predictor alone;
    ``generated`` the baselines generate wrote (``synth.baselines``), each a predictor of
    its files by their weights."""
    from dlbench.harness.convert.builds import distinct_stems

    named = distinct_stems([*apps, *baselines])
    predictors: dict[str, dict[str, float]] = {"synthetic": dict(synth)}
    predictors.update({f"{named[b]} alone (not in the set)": {b: 1.0} for b in baselines})
    predictors.update({name: files for name, files in (generated or {}).items() if files})
    predictors.update({f"{named[a]} alone": {a: 1.0} for a in apps})
    # The configurations are those the applications and the network ran on.  A baseline
    # that missed some of them (a build of it a backend could not read, a version not
    # written) is judged on those it ran, and its row says how many, rather than taking
    # configurations out of everyone's score; one that ran on fewer than three is named.
    ran = complete(results, [*apps, *synth])
    configs, actual, _ = scores(results, apps, {}, ran)
    if not configs:
        return {"configurations": 0, "note": "fewer than two configurations ran every artifact"}
    judged: dict[str, dict[str, Any]] = {}
    own: dict[str, tuple[list[str], dict[str, float], dict[str, float]]] = {}
    missing = []
    for name, need in predictors.items():
        mine, mine_actual, predicted = scores(results, apps, {name: need}, ran)
        if len(mine) < 3:
            missing.append(name)
            continue
        own[name] = (mine, mine_actual, predicted[name])
        judged[name] = {**judge(mine, mine_actual, predicted[name], floor), "configurations": len(mine)}
    if len(apps) > 2:  # the best pair, picked with hindsight: an upper bound for two models
        pairs = {
            f"{named[a]} + {named[b]}": {a: apps[a], b: apps[b]} for a, b in itertools.combinations(apps, 2)
        }
        _, _, paired = scores(results, apps, pairs, configs)
        best = max(paired, key=lambda n: judge(configs, actual, paired[n], floor)["spearman"] or -1)
        judged[f"best pair ({best})"] = {
            **judge(configs, actual, paired[best], floor),
            "configurations": len(configs),
        }
    held_out: dict[str, dict[str, float | None]] = {}
    backends = {c.split(" ")[0] for c in configs}
    for backend in sorted(backends - generated_on):
        held_out[backend] = {}
        for name, (mine, mine_actual, predicted) in own.items():
            here = [c for c in mine if c.split(" ")[0] == backend]
            held_out[backend][name] = spearman([mine_actual[c] for c in here], [predicted[c] for c in here])
    # Every ratio is against one cell per artifact, the baseline's: on a noisy machine
    # that one cell moves a predictor's errors as a whole (the zoo set's median error
    # ran from 13 % to 62 % by the configuration chosen as the baseline).
    spread = sorted(judge(*_from(configs, c, results, apps, synth), floor)["median_error"] for c in configs)
    table = {c: {"actual": actual[c]} for c in configs}
    for name, (mine, _, predicted) in own.items():
        # A predictor's ratios are against the first configuration it ran on: put on the
        # matrix's scale (its baseline's) by the actual score there.
        for c in mine:
            table[c][name] = predicted[c] * actual[mine[0]]
    return {
        "derived": DERIVED,
        "configurations": len(configs),
        "baseline": configs[0],
        "noise_floor": floor,
        "predictors": judged,
        "predictors_left_out": sorted(missing),
        "held_out_spearman": held_out,
        "median_error_by_baseline": {
            "min": spread[0],
            "median": statistics.median(spread),
            "max": spread[-1],
        },
        "scores": table,
    }


def _from(configs: list[str], base: str, results, apps, synth) -> tuple[list[str], dict, dict]:
    """The configurations, the actual and the synthetic scores with ``base`` as the baseline."""
    ordered = {c: results[c] for c in [base, *(c for c in configs if c != base)]}
    mine, actual, predicted = scores(ordered, apps, {"s": synth})
    return mine, actual, predicted["s"]
