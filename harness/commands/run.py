"""Run the whole chain for one model: train briefly in each framework, export to
ONNX and verify, build INT8/FP16 ONNX (and TensorRT engines where a GPU has
TensorRT), benchmark every backend, and print the training, conversion and
inference tables.

Every stage's artifact and manifest lives under --workdir; after an
interruption, the same command with --resume continues the same run (one run
id) without redoing finished stages, and the benchmark resumes cell by cell.
A stage that cannot run here (a framework not installed, no GPU) or that
fails is reported with its reason while the others go on.  Exit status: 0
every stage that could run here succeeded, 1 a stage or cell failed, 2 bad
input.
"""
from __future__ import annotations

HELP = "the whole chain for one model: train, convert, verify, benchmark (resumable)"


def add_arguments(p) -> None:
    p.add_argument("model", help="zoo model name (see 'dlbench models'), or a family with --size")
    p.add_argument("--size", default=None,
                   help="a size preset of the model family, e.g. 'dlbench run bert --size "
                        "bert-tiny'")
    p.add_argument("--frameworks", default=None,
                   help="comma-separated (default: every framework the model has)")
    p.add_argument("--backends", default="all",
                   help="comma-separated inference backends (default 'all': every available one)")
    p.add_argument("--precisions", default="fp32,fp16,int8",
                   help="builds to make and measure besides fp32: fp16, int8 (default all three)")
    p.add_argument("--batch-sizes", default="1,8,32", help="inference batch sizes (default 1,8,32)")
    p.add_argument("--train-steps", type=int, default=6, help="measured training steps (default 6)")
    p.add_argument("--warmup-steps", type=int, default=2, help="training warm-up steps (default 2)")
    p.add_argument("--train-batch-size", type=int, default=None,
                   help="training batch (default: the model's own)")
    p.add_argument("--device", default="cpu", help="cpu, gpu or ascend (default cpu)")
    p.add_argument("--threads", type=int, default=None,
                   help="intra-op threads (default: physical cores)")
    p.add_argument("--seed", type=int, default=0)
    m = p.add_argument_group("measurement (per inference cell)")
    m.add_argument("--warmup", type=int, default=2, help="warm-up iterations at least (default 2)")
    m.add_argument("--max-warmup", type=int, default=10, help="default 10")
    m.add_argument("--min-iterations", type=int, default=5, help="default 5")
    m.add_argument("--min-duration", type=float, default=2.0,
                   help="seconds measured at least (default 2)")
    m.add_argument("--iterations", type=int, default=None,
                   help="measure exactly this many iterations instead")
    o = p.add_argument_group("output")
    o.add_argument("--workdir", default=None,
                   help="where every stage's artifact and manifest goes (default runs/MODEL)")
    o.add_argument("--resume", action="store_true",
                   help="continue the run in --workdir without redoing finished stages")
    o.add_argument("--db", default=None, help="results database (default $DLBENCH_DB or "
                                              "results/dlbench.sqlite)")
    o.add_argument("--timeout", type=float, default=None,
                   help="seconds per training run, conversion or benchmark cell")
    o.add_argument("--no-progress", action="store_true", help="no per-cell progress on stderr")


def _split(text: str, kind=str) -> list:
    from dlbench.models.errors import UserError

    try:
        return [kind(v.strip()) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"{text!r}: expected a comma-separated list of {kind.__name__}") from None


def model_name(model: str, size: str | None) -> str:
    """``bert --size bert-tiny`` names the registered preset ``bert-tiny``."""
    from dlbench.models.errors import UserError
    from dlbench.models.registry import get_model, list_models

    if size is None:
        return get_model(model).name
    spec = get_model(size)
    if model not in (spec.family, spec.name):
        presets = [n for n in list_models() if get_model(n).family == model]
        raise UserError(f"--size {size}: not a size of {model!r}"
                        + (f"; its sizes: {', '.join(presets)}" if presets else ""))
    return spec.name


def request_from(args, argv=None):
    from dlbench.harness.bench.measure import StopRule
    from dlbench.harness.pipeline.runner import RunRequest

    return RunRequest(
        model=model_name(args.model, args.size),
        frameworks=_split(args.frameworks) if args.frameworks else None,
        backends=_split(args.backends), precisions=_split(args.precisions),
        batch_sizes=_split(args.batch_sizes, int), train_steps=args.train_steps,
        warmup_steps=args.warmup_steps, train_batch_size=args.train_batch_size,
        device=args.device, threads=args.threads, seed=args.seed,
        rule=StopRule(warmup=args.warmup, max_warmup=args.max_warmup,
                      min_iterations=args.min_iterations, min_duration_s=args.min_duration,
                      iterations=args.iterations),
        workdir=args.workdir, resume=args.resume, db=args.db, timeout=args.timeout,
        show_progress=not args.no_progress, argv=argv)


def run(args) -> int:
    from dlbench.harness.pipeline.report import run_tables
    from dlbench.harness.pipeline.runner import run_pipeline

    req = request_from(args)
    workdir, run_id, results = run_pipeline(req)
    text, failed = run_tables(req, workdir, run_id, results)
    print(text)
    return 1 if failed else 0
