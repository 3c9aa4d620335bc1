"""One module per subcommand; see harness.cli."""

import sys


def print_notes(command: str, record: dict) -> None:
    """A record's notes (a fixed batch followed, a graph normalized) on stderr, where the
    user sees what dlbench chose for them without it mixing into the printed table."""
    for note in record.get("notes") or []:
        print(f"dlbench {command}: note: {note}", file=sys.stderr)
