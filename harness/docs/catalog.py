"""The reference tables of what dlbench knows: backends, formats, build targets, data
formats and the zoo, each read from the registry that declares it.

These are the README's old hand-kept tables.  Every one had a registry behind it
already (``BACKENDS``, ``FORMATS``, ``BUILD_TARGETS``, ``DATA_FORMATS``, the model
registry), which the CLI reads; rendering the page from the same registry is what
keeps the page and the program the same, plugins' declarations included.  Facts
that depend on the machine (which backends are available here, which devices they
see) are left to ``dlbench backends``: a site built on a laptop must not say what
that laptop lacks.
"""

from __future__ import annotations

from dlbench.harness.docs import escape, table


def _code(items) -> str:
    return ", ".join(f"`{i}`" for i in items)


def backends() -> str:
    """One row per listed backend: what it is, what it takes, what installs it."""
    from dlbench.harness.backends import all_backends

    rows = [
        [
            f"`{b.name}`",
            escape(b.description),
            _code(b.formats),
            f"`{b.distribution}` (`pip install 'dlbench[{b.extra}]'`)",
            _code(o.name for o in b.options) or "none",
        ]
        for b in all_backends()
    ]
    return table(("Backend", "What runs", "Takes (artifact formats)", "Needs", "Options"), rows)


def _flag(o) -> str:
    """The ``bench`` spelling of a backend option, as ``commands.bench`` derives it."""
    flag = "--" + o.name.replace("_", "-")
    if o.switch:
        return f"`{flag}` / `--no-{o.name.replace('_', '-')}`"
    return f"`{flag} [VALUE]`" if o.const is not None else f"`{flag} VALUE`"


def backend_options() -> str:
    """Every declared backend option, with the ``bench`` flag and ``-O`` key that set it."""
    from dlbench.harness.backends import all_backends

    rows = [
        [
            f"`{b.name}`",
            f"`-O {o.name}=VALUE`<br>{_flag(o)}",
            "" if o.default is None else f"`{o.default}`",
            _code(o.choices) if o.choices else escape(o.kind.__name__),
            escape(o.help),
        ]
        for b in all_backends()
        for o in b.options
    ]
    return table(("Backend", "Option", "Default", "Values", "What it does"), rows)


def artifact_formats() -> str:
    """The artifact formats the resolver and the backends read."""
    from dlbench.harness.backends import all_backends
    from dlbench.harness.formats import FORMATS

    takers: dict[str, list[str]] = {}
    for b in all_backends():
        for f in b.formats:
            takers.setdefault(f, []).append(b.name)
    rows = [
        [
            f"`{f.name}`",
            escape(f.description),
            _code(f.suffixes) or "not a file of its own",
            "yes" if f.sniff else "",
            f"`{f.default_backend}`" if f.default_backend else "",
            "its own" if f.own_precision else "the cell's",
            _code(takers.get(f.name, ())),
        ]
        for f in FORMATS.all()
    ]
    headers = ("Format", "What it is", "Suffixes", "By content", "Default backend", "Precision", "Backends")
    return table(headers, rows)


def build_targets() -> str:
    """``dlbench build --to`` targets, as their hops declare them."""
    from dlbench.converters.base import BUILD_TARGETS

    rows = []
    for name in BUILD_TARGETS.names():
        hop = BUILD_TARGETS.get(name)
        rows.append(
            [
                f"`{name}`",
                escape(hop.summary),
                f"`{hop.artifact_format}` on {hop.device}",
                _code(hop.precisions) if hop.precisions else f"`{hop.precision}`",
                f"{hop.min_opset} and later" if hop.min_opset else "what ONNX Runtime loads",
                _code("--" + o.replace("_", "-") for o in hop.options),
            ]
        )
    return table(
        ("`--to`", "What it makes", "Writes", "Precisions", "Source opsets", "Options it reads"), rows
    )


def data_formats() -> str:
    """``--data``'s formats: the table ``harness.data.formats`` renders from its registry."""
    from dlbench.harness.data.formats import markdown_table

    return markdown_table()


def zoo() -> str:
    """The zoo with its counts, from the framework-free walks ``dlbench models`` prints."""
    from dlbench.models.registry import get_model, list_models

    specs = [get_model(n) for n in list_models("*")]
    rows = [
        [
            f"`{spec.name}`",
            escape(spec.display_name),
            escape(spec.task),
            f"{spec.parameter_count:,}",
            f"{spec.gflops_per_sample:.4g}",
            "<br>".join(f"`{i.name}` {'×'.join(map(str, i.shape))}" for i in spec.inputs),
            str(spec.num_classes),
            str(spec.default_batch_size),
            ", ".join(spec.frameworks),
        ]
        for spec in specs
    ]
    headers = (
        "Model",
        "Network",
        "Task",
        "Parameters",
        "GFLOPs / sample",
        "Inputs",
        "Classes",
        "Batch",
        "Frameworks",
    )
    tasks = len({s.task for s in specs})
    return f"{len(specs)} models in {tasks} tasks.\n\n" + table(headers, rows)
