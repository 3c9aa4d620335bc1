"""List the model zoo: parameters, GFLOPs per sample, input shape, frameworks."""

from __future__ import annotations

import json

HELP = "list the model zoo"


def add_arguments(p) -> None:
    p.add_argument("pattern", nargs="?", default="*", help="glob over model names")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args) -> int:
    from dlbench.harness.output.tables import markdown
    from dlbench.models.registry import get_model, list_models

    specs = [get_model(n) for n in list_models(args.pattern)]
    if args.json:
        print(json.dumps([s.describe() for s in specs], indent=2))
        return 0
    rows = [
        [
            s.name,
            s.display_name,
            s.task,
            f"{s.parameter_count:,}",
            f"{s.gflops_per_sample:.3f}",
            "x".join(map(str, s.inputs[0].shape)),
            s.num_classes,
            s.default_batch_size,
            ", ".join(s.frameworks),
        ]
        for s in specs
    ]
    print(
        markdown(
            (
                "Model",
                "Network",
                "Task",
                "Parameters",
                "GFLOPs/sample",
                "Input",
                "Classes",
                "Batch",
                "Frameworks",
            ),
            rows,
        )
    )
    print(
        "\nGFLOPs count one multiply-add as two FLOPs, over the matrix work: convolutions, "
        "dense layers, recurrent cells and attention products."
    )
    return 0
