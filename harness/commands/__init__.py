"""One module per subcommand; see harness.cli."""

import sys


def print_notes(command: str, record: dict) -> None:
    """A record's notes (a fixed batch followed, a graph normalized) on stderr, where the
    user sees what dlbench chose for them without it mixing into the printed table."""
    for note in record.get("notes") or []:
        print(f"dlbench {command}: note: {note}", file=sys.stderr)


def add_user_model_arguments(p, verb: str, inputs: bool = True) -> None:
    """``--model-from`` and ``--weights`` (and, where the command has no input options of
    its own, ``--shape`` and ``--input``): a user's own model, said the same everywhere."""
    p.add_argument(
        "--model-from",
        default=None,
        metavar="MODULE:CALLABLE",
        help=f"{verb} the model this code returns (MODULE:CALLABLE or "
        f"FILE.py:CALLABLE; PyTorch, Keras or MindSpore), in each cell's process",
    )
    p.add_argument(
        "--weights",
        default=None,
        metavar="FILE",
        help="weights loaded into the --model-from model (a state_dict, Keras "
        "weights, a MindSpore checkpoint)",
    )
    if inputs:
        p.add_argument(
            "--shape",
            action="append",
            default=[],
            metavar="NAME=AxBxC",
            help="full shape of an input your model does not size itself (first dimension: the batch)",
        )
        p.add_argument(
            "--input",
            dest="inputs",
            action="append",
            default=[],
            metavar="NAME=VALUE|FILE.npy",
            help="set an input, as for bench",
        )


def user_inputs(args) -> tuple[dict, dict]:
    """(--shape, --input) of a command that took ``add_user_model_arguments``."""
    from dlbench.harness.bench.input_args import collect, parse_input, shapes_from

    return (shapes_from(args.shape, []), collect("--input", (parse_input(a) for a in args.inputs)))


def add_executor_arguments(p, what: str, default: str) -> None:
    """``--executor`` and ``--ray-resources``, said the same by every command that has them;
    ``default`` is the command's request's (harness.cli.config.field_default)."""
    p.add_argument(
        "--executor",
        default=default,
        metavar="local|ray[=ADDRESS]",
        help=f"where {what} run: local, each a process of this machine; ray, "
        f"each a task on the Ray cluster running here, or on the one at "
        f"ray=HOST:PORT (or ray://HOST:PORT), whose nodes must see the model "
        f"files at the same paths (default %(default)s)",
    )
    p.add_argument(
        "--ray-resources",
        action="append",
        default=[],
        metavar="NAME[=AMOUNT]",
        help="with --executor ray: a resource every cell asks for besides its "
        "threads and device, e.g. node:10.0.0.5 (that node), "
        "accelerator_type:H100, or a label the nodes were started with; "
        "repeat or comma-separate",
    )


def add_with_argument(p, what: str = "cells") -> None:
    """``--with PACKAGE==VERSION``, the library-version axis (harness.cells.envs), said the same
    by every command that has it."""
    p.add_argument(
        "--with",
        dest="with_specs",
        action="append",
        default=[],
        metavar="PACKAGE==VERSION",
        help=f"run the {what} with this version of a package instead of the "
        f"installed one (an environment made once with uv and cached); "
        f"repeat: each is a value of the axis",
    )
