"""Run the whole chain for one model: train briefly in each framework, export to
ONNX and verify, build INT8/FP16 ONNX (and TensorRT engines where a GPU has
TensorRT), benchmark every backend, and print the training, conversion and
inference tables.  Your own model (a framework's model file, or --model-from
code) skips training: export, builds and benchmarks; an ONNX file skips the
export too (its builds go into --workdir, nothing is written beside it).

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
    """The request's declared flags (``RunRequest``); the model, a family's --size and a
    user's own model are read here (``_user_model``, ``model_name``)."""
    from dlbench.core import flags
    from dlbench.harness.cli.config import add_config_arguments
    from dlbench.harness.commands import add_user_model_arguments
    from dlbench.harness.commands.bench import add_backend_options
    from dlbench.harness.pipeline.runner import OUTPUT, RunRequest
    from dlbench.models.user.hub import named

    p.add_argument(
        "model",
        nargs="?",
        default=None,
        help="zoo model name (see 'dlbench models'), a family with --size, your "
        f"own model file (TorchScript, .pt2, .keras, .h5, SavedModel, MindIR) or {named()}: "
        "exported, built and benchmarked, not trained; or an ONNX file: built and benchmarked",
    )
    add_user_model_arguments(p, "run the chain (no training) on")
    p.add_argument(
        "--size",
        default=None,
        help="a size preset of the model family, e.g. 'dlbench run bert --size bert-tiny'",
    )
    output = p.add_argument_group(OUTPUT)
    flags.add_arguments(p, RunRequest)
    add_backend_options(
        p.add_argument_group(
            "backend options of the benchmark cells (each backend's declared options; "
            "'dlbench backends --options')"
        )
    )
    output.add_argument(
        "--quiet",
        "-q",
        "--no-progress",
        dest="quiet",
        action="store_true",
        help="no progress on stderr (--no-progress is the same)",
    )
    output.add_argument(
        "--print-steps",
        nargs="?",
        const="commands",
        choices=("commands", "script"),
        default=None,
        help="print the dlbench commands this run would perform, one a "
        "line, and run nothing; 'script': as scripts/FAMILY.sh (its knobs default to "
        "this run's options)",
    )
    add_config_arguments(p)


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
    from dlbench.models.user import hub

    if args.model_from and args.model:
        raise UserError("give a model or --model-from, not both")
    named = args.model is not None and not os.path.exists(args.model) and hub.parse(args.model) is not None
    if (
        not args.model_from
        and not named
        and (args.model is None or args.model in list_models() or not os.path.exists(args.model))
    ):
        if args.model is None:
            raise UserError("give a zoo model name, a model file or --model-from")
        if args.weights or args.shapes or args.inputs:
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

    from dlbench.core import flags
    from dlbench.harness.cli.config import resolved
    from dlbench.harness.commands.bench import backend_options
    from dlbench.harness.pipeline.runner import RunRequest
    from dlbench.models.user import record_name

    user = _user_model(args)
    if user is None:
        name = model_name(args.model, args.size)
    elif user.path and not os.path.exists(user.path):  # a model by name (timm:resnet18)
        name = record_name(user.path)
    else:
        name = os.path.basename(str(args.model or args.model_from).rstrip("/"))
    return flags.from_args(
        RunRequest,
        args,
        model=name,
        user=user,
        backend_options=backend_options(args),
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
