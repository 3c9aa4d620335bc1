"""List every inference backend the design names, available here or not, and why.

``--options`` lists what each backend declares it takes (``harness.backends.base.Option``):
the same declarations ``dlbench bench``'s flags, its ``--config`` keys and the docs are
made from.
"""

from __future__ import annotations

import json

HELP = "list inference backends and whether they can run on this machine"


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--options",
        action="store_true",
        help="list each backend's options (bench --NAME VALUE or -O NAME=VALUE)",
    )


def run(args) -> int:
    from dlbench.harness.backends import all_backends
    from dlbench.harness.output.tables import markdown

    if args.options:
        rows = [
            {
                "backend": b.name,
                "option": o.name,
                "default": o.default,
                "choices": list(o.choices) if o.choices else None,
                "type": o.kind.__name__,
                "help": o.help,
            }
            for b in all_backends()
            for o in b.options
        ]
        if args.json:
            print(json.dumps(rows, indent=2))
            return 0
        print(
            markdown(
                ("Backend", "Option", "Default", "Values", "What it does"),
                [
                    [
                        r["backend"],
                        r["option"],
                        str(r["default"]),
                        "/".join(map(str, r["choices"])) if r["choices"] else r["type"],
                        r["help"],
                    ]
                    for r in rows
                ],
            )
        )
        return 0
    avail = [b.availability() for b in all_backends()]
    if args.json:
        print(json.dumps([r.__dict__ for r in avail], indent=2))
        return 0
    print(
        markdown(
            ("Backend", "Available", "Devices", "Why / notes"),
            [[r.name, "yes" if r.available else "no", ", ".join(r.devices) or "-", r.reason] for r in avail],
        )
    )
    return 0
