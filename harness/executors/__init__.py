"""Where a cell's process runs: on this machine (``local``) or on a Ray cluster (``ray``).

Whichever runs it, a cell stays what ``launcher.run_cell`` makes it: its own process
with its own timeout, peak memory and crash capture.  An executor only decides which
machine calls ``run_cell``, and hands back the ``CellOutcome`` with a description of
where it ran; the caller builds and stores the record exactly as before, so records,
resume, ``--json`` and progress do not depend on the executor.  This package is the one
place that tells them apart; Ray is imported only when ``--executor ray`` connects
(``executors.raycluster``), so ``dlbench --help`` and ``dlbench env`` never load it.
"""

from __future__ import annotations

from collections.abc import Callable

from dlbench.core.errors import UserError
from dlbench.core.flags import Flag
from dlbench.harness.executors.base import Executor, Needs

__all__ = ["DEFAULT_EXECUTOR", "Executor", "Needs", "check", "command_args", "open_executor", "parse"]

DEFAULT_EXECUTOR = "local"

# name -> factory(address or None, --ray-resources); one registration per executor.
EXECUTORS: dict[str, Callable[[str | None, list[str]], Executor]] = {}


def register(name: str):
    def add(factory):
        EXECUTORS[name] = factory
        return factory

    return add


@register("local")
def _local(address: str | None, resources: list[str]) -> Executor:
    from dlbench.harness.executors.local import Local

    return Local()


@register("ray")
def _ray(address: str | None, resources: list[str]) -> Executor:
    from dlbench.harness.executors.raycluster import connect

    return connect(address, resources)


def parse(spec: str) -> tuple[str, str | None]:
    """``local``, ``ray``, ``ray=ADDRESS`` (or a bare ``ray://HOST:PORT``) -> (name,
    address); UserError otherwise."""
    spec = (spec or "").strip()
    if spec.startswith("ray://"):
        return "ray", spec
    name, sep, address = spec.partition("=")
    if name not in EXECUTORS:
        raise UserError(
            f"--executor {spec!r}: choose {' or '.join(EXECUTORS)} (ray=HOST:PORT for a given cluster)"
        )
    if sep and name != "ray":
        raise UserError(f"--executor {spec}: only ray takes an address")
    if sep and not address.strip():
        raise UserError(
            f"--executor {spec}: give the cluster's address after '=' (HOST:PORT "
            f"or ray://HOST:PORT), or 'ray' alone for the one running here"
        )
    return name, address.strip() or None


def check(spec: str, resources: list[str], device_id: int = 0, with_specs=()) -> None:
    """The executor options' own rules, before anything connects (exit 2 on the first)."""
    name, address = parse(spec)
    if name != "ray":
        if resources:
            raise UserError("--ray-resources applies to --executor ray")
        return
    from dlbench.harness.executors.raycluster import check_address, parse_resources

    check_address(address)
    parse_resources(resources)
    if device_id:
        raise UserError(
            "--device-id: with --executor ray, Ray gives each GPU cell its own "
            "GPU (device 0 of that cell); choose a node or accelerator type with "
            "--ray-resources instead"
        )
    if with_specs:
        raise UserError("--with: its environments are made on this machine; run it with --executor local")


def open_executor(spec: str, resources: list[str] | None = None) -> Executor:
    """The executor ``spec`` names, connected: a Ray cluster is joined here (UserError when
    none answers), before the first cell runs."""
    name, address = parse(spec)
    return EXECUTORS[name](address, list(resources or []))


WHERE_GROUP = "where the cells run"


def executor_flag(what: str) -> Flag:
    """``--executor``, said alike by every command whose work runs in cells."""
    return Flag(
        ("--executor",),
        group=WHERE_GROUP,
        metavar="local|ray[=ADDRESS]",
        help=f"where {what} run: local, each a process of this machine; ray, each a task "
        f"on the Ray cluster running here, or on the one at ray=HOST:PORT (or "
        f"ray://HOST:PORT), whose nodes must see the model files at the same paths "
        f"(default {{default}})",
    )


RAY_RESOURCES = Flag(
    ("--ray-resources",),
    many=True,
    group=WHERE_GROUP,
    metavar="NAME[=AMOUNT]",
    help="with --executor ray: a resource every cell asks for besides its threads and "
    "device, e.g. node:10.0.0.5 (that node), accelerator_type:H100, or a label the "
    "nodes were started with; repeat or comma-separate",
)


def command_args(spec: str, resources: list[str]) -> list[str]:
    """The options as a command line gives them (``dlbench run --print-steps``), when set."""
    return ([] if spec == DEFAULT_EXECUTOR else ["--executor", spec]) + [
        a for r in resources for a in ("--ray-resources", r)
    ]
