"""One module per subcommand; see harness.cli."""

import sys


def print_notes(command: str, record: dict) -> None:
    """A record's notes (a fixed batch followed, a graph normalized) on stderr, where the
    user sees what dlbench chose for them without it mixing into the printed table."""
    for note in record.get("notes") or []:
        print(f"dlbench {command}: note: {note}", file=sys.stderr)


def add_user_model_arguments(p, verb: str) -> None:
    """``--model-from``, ``--weights``, ``--shape`` and ``--input`` on a command whose request
    does not declare them (``dlbench run``, which reads them into its ``UserModel``);
    ``harness.usermodel`` declares them."""
    from dlbench.core.flags import add_flag
    from dlbench.harness.usermodel import USER_INPUT, USER_SHAPE, model_from_flag, weights_flag

    add_flag(p, "model_from", model_from_flag(verb), None)
    add_flag(p, "weights", weights_flag(), None)
    add_flag(p, "shapes", USER_SHAPE, {}, [])
    add_flag(p, "inputs", USER_INPUT, {}, [])


def user_inputs(args) -> tuple[dict, dict]:
    """(--shape, --input) of a command that took ``add_user_model_arguments``."""
    from dlbench.harness.bench.input_args import shapes_from, values_from

    return shapes_from(args.shapes), values_from(args.inputs)
