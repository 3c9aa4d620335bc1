"""Run the whole chain for one model: train briefly in each framework, export to
ONNX and verify, build INT8/FP16 ONNX (and TensorRT engines where a GPU has
TensorRT), benchmark every backend, and print the training, conversion and
inference tables.  Your own model (a framework's model file, or --model-from
code) skips training: export, builds and benchmarks.

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
    from dlbench.harness.cli.config import add_config_arguments, cli_form, field_default
    from dlbench.harness.commands import add_executor_arguments, add_user_model_arguments
    from dlbench.harness.pipeline.runner import RunRequest

    def req(name):
        return cli_form(field_default(RunRequest, name))

    def own(name):  # None in the request: the model's spec decides
        return "the model's own" if req(name) is None else req(name)

    rule = field_default(RunRequest, "rule")  # the run's own stop rule (DEMO_RULE)
    p.add_argument(
        "model",
        nargs="?",
        default=None,
        help="zoo model name (see 'dlbench models'), a family with --size, or your "
        "own model file (TorchScript, .pt2, .keras, .h5, SavedModel, MindIR): "
        "exported, built and benchmarked, not trained",
    )
    add_user_model_arguments(p, "run the chain (no training) on")
    p.add_argument(
        "--size",
        default=None,
        help="a size preset of the model family, e.g. 'dlbench run bert --size bert-tiny'",
    )
    p.add_argument(
        "--frameworks",
        default=req("frameworks"),
        help="comma-separated (default: every framework the model has)",
    )
    p.add_argument(
        "--backends",
        default=req("backends"),
        help="comma-separated inference backends (default '%(default)s': every available one)",
    )
    p.add_argument(
        "--precisions",
        default=req("precisions"),
        help=f"builds to make and measure besides fp32: fp16, int8 (default {own('precisions')})",
    )
    p.add_argument(
        "--batch-sizes",
        default=req("batch_sizes"),
        help=f"inference batch sizes (default {own('batch_sizes')})",
    )
    p.add_argument(
        "--train-steps",
        type=int,
        default=req("train_steps"),
        help=f"measured training steps (default {own('train_steps')})",
    )
    p.add_argument(
        "--warmup-steps",
        type=int,
        default=req("warmup_steps"),
        help=f"training warm-up steps (default {own('warmup_steps')})",
    )
    p.add_argument(
        "--train-batch-size",
        type=int,
        default=req("train_batch_size"),
        help="training batch (default: the model's own)",
    )
    p.add_argument("--device", default=req("device"), help="cpu, gpu or ascend (default %(default)s)")
    p.add_argument(
        "--threads", type=int, default=req("threads"), help="intra-op threads (default: physical cores)"
    )
    p.add_argument(
        "--allocator",
        default=req("allocator"),
        metavar="NAME",
        help="memory allocator of the training and benchmark processes: system, "
        "tuned (glibc keeping freed memory), jemalloc or tcmalloc "
        "(default %(default)s)",
    )
    p.add_argument("--seed", type=int, default=req("seed"), help="default %(default)s")
    m = p.add_argument_group("measurement (per inference cell)")
    m.add_argument(
        "--warmup", type=int, default=rule.warmup, help="warm-up iterations at least (default %(default)s)"
    )
    m.add_argument("--max-warmup", type=int, default=rule.max_warmup, help="default %(default)s")
    m.add_argument("--min-iterations", type=int, default=rule.min_iterations, help="default %(default)s")
    m.add_argument(
        "--min-duration",
        type=float,
        default=rule.min_duration_s,
        help="seconds measured at least (default %(default)g)",
    )
    m.add_argument(
        "--iterations", type=int, default=rule.iterations, help="measure exactly this many iterations instead"
    )
    o = p.add_argument_group("output")
    o.add_argument(
        "--workdir",
        default=req("workdir"),
        help="where every stage's artifact and manifest goes (default runs/MODEL)",
    )
    o.add_argument(
        "--resume",
        action="store_true",
        default=req("resume"),
        help="continue the run in --workdir without redoing finished stages",
    )
    o.add_argument(
        "--db", default=req("db"), help="results database (default $DLBENCH_DB or results/dlbench.sqlite)"
    )
    o.add_argument(
        "--timeout",
        type=float,
        default=req("timeout"),
        help="seconds per training run, conversion or benchmark cell",
    )
    o.add_argument(
        "--quiet",
        "-q",
        "--no-progress",
        dest="quiet",
        action="store_true",
        help="no progress on stderr (--no-progress is the same)",
    )
    o.add_argument(
        "--print-steps",
        nargs="?",
        const="commands",
        choices=("commands", "script"),
        default=None,
        help="print the dlbench commands this run would perform, one a "
        "line, and run nothing; 'script': as scripts/FAMILY.sh (its knobs default to "
        "this run's options)",
    )
    add_executor_arguments(
        p.add_argument_group("where the benchmark cells run (training, export and builds run here)"),
        "the benchmark cells",
        req("executor"),
    )
    add_config_arguments(p)


def _split(text: str, kind=str) -> list:
    from dlbench.core.errors import UserError

    try:
        return [kind(v.strip()) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"{text!r}: expected a comma-separated list of {kind.__name__}") from None


def model_name(model: str, size: str | None) -> str:
    """``bert --size bert-tiny`` names the registered preset ``bert-tiny``."""
    from dlbench.core.errors import UserError
    from dlbench.models.registry import get_model, list_models

    if size is None:
        return get_model(model).name
    spec = get_model(size)
    if model not in (spec.family, spec.name):
        presets = [n for n in list_models() if get_model(n).family == model]
        raise UserError(
            f"--size {size}: not a size of {model!r}"
            + (f"; its sizes: {', '.join(presets)}" if presets else "")
        )
    return spec.name


def _user_model(args):
    """A user's own model (a file that is no zoo name, or --model-from), else None."""
    import os

    from dlbench.core.errors import UserError
    from dlbench.harness.commands import user_inputs
    from dlbench.harness.pipeline.user import UserModel
    from dlbench.models.registry import list_models

    if args.model_from and args.model:
        raise UserError("give a model or --model-from, not both")
    if not args.model_from and (
        args.model is None or args.model in list_models() or not os.path.exists(args.model)
    ):
        if args.model is None:
            raise UserError("give a zoo model name, a model file or --model-from")
        if args.weights or args.shape or args.inputs:
            raise UserError(
                "--weights, --shape and --input are for your own model; a zoo model sizes its inputs itself"
            )
        return None
    shapes, inputs = user_inputs(args)
    return UserModel(
        path=args.model, model_from=args.model_from, weights=args.weights, shapes=shapes, inputs=inputs
    )


def request_from(args, argv=None):
    import os

    from dlbench.harness.bench.measure import StopRule
    from dlbench.harness.cli.config import resolved
    from dlbench.harness.pipeline.runner import RunRequest

    user = _user_model(args)
    name = (
        model_name(args.model, args.size)
        if user is None
        else os.path.basename(str(args.model or args.model_from).rstrip("/"))
    )
    return RunRequest(
        model=name,
        user=user,
        frameworks=_split(args.frameworks) if args.frameworks else None,
        backends=_split(args.backends),
        precisions=_split(args.precisions) if args.precisions is not None else None,
        batch_sizes=_split(args.batch_sizes, int) if args.batch_sizes is not None else None,
        train_steps=args.train_steps,
        warmup_steps=args.warmup_steps,
        train_batch_size=args.train_batch_size,
        device=args.device,
        threads=args.threads,
        allocator=args.allocator,
        seed=args.seed,
        rule=StopRule(
            warmup=args.warmup,
            max_warmup=args.max_warmup,
            min_iterations=args.min_iterations,
            min_duration_s=args.min_duration,
            iterations=args.iterations,
        ),
        workdir=args.workdir,
        resume=args.resume,
        db=args.db,
        timeout=args.timeout,
        executor=args.executor,
        ray_resources=list(args.ray_resources),
        show_progress=not args.quiet,
        argv=argv,
        config=resolved(args),
    )


def run(args) -> int:
    from dlbench.harness.pipeline.report import run_tables
    from dlbench.harness.pipeline.runner import run_pipeline

    req = request_from(args)
    if args.print_steps:
        from dlbench.harness.pipeline.plan import print_steps
        from dlbench.harness.pipeline.runner import plan
        from dlbench.harness.pipeline.script import script

        steps = plan(req)
        print(script(steps) if args.print_steps == "script" else print_steps(steps), end="")
        return 0
    if args.print_config:
        from dlbench.harness.cli.config import to_toml
        from dlbench.harness.pipeline.runner import validate

        validate(req)
        print(to_toml(req.config), end="")
        return 0
    workdir, run_id, results = run_pipeline(req)
    text, failed = run_tables(req, workdir, run_id, results)
    print(text)
    return 1 if failed else 0
