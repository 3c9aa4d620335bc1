"""List every inference backend the design names, available here or not, and why."""
from __future__ import annotations

import json

HELP = "list inference backends and whether they can run on this machine"


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args) -> int:
    from dlbench.harness.backends import all_backends
    from dlbench.harness.tables import markdown

    rows = [b.availability() for b in all_backends()]
    if args.json:
        print(json.dumps([r.__dict__ for r in rows], indent=2))
        return 0
    print(markdown(("Backend", "Available", "Devices", "Why / notes"),
                   [[r.name, "yes" if r.available else "no", ", ".join(r.devices) or "-",
                     r.reason] for r in rows]))
    return 0
