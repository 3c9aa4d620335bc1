"""Data-parallel training cells on the frameworks' own launchers (parent side).

One scaling cell is one launcher invocation on this node: ``torchrun`` for
PyTorch (DistributedDataParallel over gloo on a CPU, NCCL on a GPU),
``msrun`` for MindSpore (its dynamic cluster, data-parallel mode), and for
TensorFlow, which has no launcher of its own, one process per worker with
``TF_CONFIG`` naming every worker (``harness.training.tfworkers``), as
MultiWorkerMirroredStrategy expects.  The launcher is the cell's process:
``launcher.run_cell`` still owns the timeout and kills the whole tree, so a
rank that crashes or hangs fails that cell, its peers die with it, and the
sweep goes on.

On a CPU a "device" is one process pinned to its share of the cores (the
ranks must not fight over them, or the figure would measure the fight); the
record says so in its resource label.  Weak scaling (the default) keeps the
per-device batch and grows the global one; strong scaling splits a fixed
global batch.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dlbench.core.errors import UserError
from dlbench.harness.cells.threads import usable_cores

SCALINGS = ("weak", "strong")
LAUNCHERS = {
    "pytorch": "torchrun (DistributedDataParallel)",
    "tensorflow": "TF_CONFIG workers (MultiWorkerMirroredStrategy)",
    "mindspore": "msrun (dynamic cluster, DATA_PARALLEL)",
}
NOTE = (
    "one device = one process; on a CPU each is pinned to its share of the cores. "
    "Throughput = global samples / (latest rank's window end - earliest rank's start). "
    "Each rank trains on its own seeded data."
)
LOOPBACK = "127.0.0.1"
# Chosen ports start here: above the well-known and most registered services' ports.
PORT_FLOOR = 20000
# How long the frameworks wait for every rank to join: a missing node should fail the cell
# well inside a user's --timeout, not after MindSpore's default 600 s.
JOIN_TIMEOUT_S = 300
# MindSpore's msrun starts `python` from PATH; this stub runs the cell module under it.
_MS_STUB = "from runpy import run_module\nrun_module('dlbench.harness.cells.cell', run_name='__main__')\n"


@dataclass(frozen=True)
class Topology:
    """Where the ranks of one cell run: ``devices`` processes on each of ``nodes`` nodes,
    this one being ``node_rank``; rank r of node n is global rank n * devices + r."""

    devices: int
    nodes: int = 1
    node_rank: int = 0
    master_addr: str = LOOPBACK
    master_port: int = 0  # 0: a free port, chosen per cell (one node only)
    node_addrs: tuple[str, ...] = field(default_factory=tuple)  # TensorFlow, several nodes

    @property
    def world_size(self) -> int:
        return self.devices * self.nodes

    def to_dict(self) -> dict:
        return {**asdict(self), "node_addrs": list(self.node_addrs), "world_size": self.world_size}


def check(topo: Topology, frameworks: list[str]) -> None:
    """Refuse a topology no launcher can run, before any cell starts."""
    if topo.devices < 1:
        raise UserError(f"--devices must be at least 1, got {topo.devices}")
    if topo.nodes < 1:
        raise UserError(f"--nodes must be at least 1, got {topo.nodes}")
    if not 0 <= topo.node_rank < topo.nodes:
        raise UserError(f"--node-rank must be in [0, {topo.nodes}), got {topo.node_rank}")
    if topo.nodes > 1 and not topo.master_port:
        raise UserError("--nodes > 1 needs --master-port: every node must name the same one")
    if not 0 <= topo.master_port < 65536:
        raise UserError(f"--master-port must be a port number, got {topo.master_port}")
    if topo.nodes > 1 and "tensorflow" in frameworks and len(topo.node_addrs) != topo.nodes:
        raise UserError(
            f"TensorFlow names every worker in TF_CONFIG: give --node-addrs with "
            f"the {topo.nodes} nodes' addresses in node-rank order"
        )


def split_batch(batch: int, devices: int, scaling: str) -> int:
    """The per-device batch of a cell: the batch itself (weak), or its share (strong)."""
    if scaling not in SCALINGS:
        raise UserError(f"--scaling must be weak or strong, got {scaling!r}")
    if scaling == "weak":
        return batch
    if batch % devices:
        raise UserError(
            f"--scaling strong: the global batch {batch} does not split evenly over {devices} devices"
        )
    return batch // devices


def cores_per_rank(devices: int, threads: int | None) -> int:
    """Each rank's intra-op threads: the user's count, else its share of the cores."""
    return threads or max(1, usable_cores() // devices)


def resource(topo: Topology, device: str, threads: int, gpu_name: str | None = None) -> str:
    """The resource label of a scaling record: what one device was, and how many."""
    nodes = f" on {topo.nodes} nodes" if topo.nodes > 1 else ""
    if device == "cpu":
        unit = "process" if topo.world_size == 1 else "processes"
        cores = "core" if threads == 1 else "cores"
        return f"{topo.world_size} CPU {unit} × {threads} {cores}{nodes}"
    return f"{topo.world_size} × {gpu_name or device.upper()}{nodes}"


def free_port() -> int:
    """A port no one listens on now (for a one-node cell's rendezvous)."""
    return free_ports(1)[0]


def free_ports(n: int, rng: random.Random | None = None) -> list[int]:
    """``n`` distinct ports no one listens on now, below the kernel's ephemeral range.

    A port the kernel handed out for binding (port 0) is an ephemeral one: until the
    launcher binds it, any process's outgoing connection may take it as its local port,
    and a rendezvous client retrying against it before its server listens can connect to
    itself (TCP simultaneous open), a hang with nothing in the log.  Ports below the
    range are never handed out that way.  They are held open together until all are
    chosen, so none is chosen twice."""
    rng = rng or random.Random()
    low = _ephemeral_low()
    socks: list[socket.socket] = []
    try:
        for candidate in rng.sample(range(PORT_FLOOR, low), min(low - PORT_FLOOR, 4096)):
            s = socket.socket()
            try:
                s.bind((LOOPBACK, candidate))
            except OSError:
                s.close()
                continue
            socks.append(s)
            if len(socks) == n:
                return [s.getsockname()[1] for s in socks]
        raise UserError(f"no {n} free ports between {PORT_FLOOR} and {low} on {LOOPBACK}: give --master-port")
    finally:
        for s in socks:
            s.close()


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux; IANA's 49152 elsewhere)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 49152
    return low if low > PORT_FLOOR + 64 else 49152


def launcher(framework: str, topo: Topology, env: dict[str, str], device: str = "cpu"):
    """The ``run_cell`` launcher for ``framework``: (scratch dir, cell args) -> argv.
    ``env`` gets what the launcher needs (PATH for msrun's python, one GPU per
    TensorFlow worker)."""
    python = sys.executable
    if framework == "pytorch":

        def argv(tmp: Path, cell: list[str]) -> list[str]:
            return [
                python,
                "-m",
                "torch.distributed.run",
                f"--nnodes={topo.nodes}",
                f"--node-rank={topo.node_rank}",
                f"--nproc-per-node={topo.devices}",
                f"--master-addr={topo.master_addr}",
                f"--master-port={topo.master_port}",
                "--max-restarts=0",
                "--monitor-interval=0.5",
                "-m",
                "dlbench.harness.cells.cell",
                *cell,
            ]

        env.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
        return argv
    if framework == "mindspore":
        env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", "")])
        msrun = shutil.which("msrun", path=env["PATH"])

        def argv(tmp: Path, cell: list[str]) -> list[str]:
            stub = tmp / "dlbench_cell.py"
            stub.write_text(_MS_STUB)
            head = [msrun] if msrun else [python, "-m", "mindspore.parallel.cluster.run"]
            return [
                *head,
                f"--worker_num={topo.world_size}",
                f"--local_worker_num={topo.devices}",
                f"--master_addr={topo.master_addr}",
                f"--master_port={topo.master_port}",
                f"--node_rank={topo.node_rank}",
                f"--log_dir={tmp / 'msrun'}",
                "--join=True",
                f"--cluster_time_out={JOIN_TIMEOUT_S}",
                str(stub),
                *cell,
            ]

        return argv
    if framework == "tensorflow":
        if device == "gpu":
            env["DLBENCH_GPU_PER_WORKER"] = "1"
        # One node: ports free now, not ports that merely follow a free one.
        workers = (
            tf_workers(topo) if topo.nodes > 1 else [f"{LOOPBACK}:{p}" for p in free_ports(topo.devices)]
        )

        def argv(tmp: Path, cell: list[str]) -> list[str]:
            return [
                python,
                "-m",
                "dlbench.harness.training.tfworkers",
                ",".join(workers),
                str(topo.node_rank),
                str(topo.devices),
                *cell,
            ]

        return argv
    raise UserError(f"{framework}: dlbench has no data-parallel launcher for it")


def tf_workers(topo: Topology) -> list[str]:
    """Every TensorFlow worker's address, in global rank order: node n's ranks listen on
    consecutive ports after the master port (on its own address)."""
    hosts = topo.node_addrs or (topo.master_addr,)
    return [f"{hosts[n]}:{topo.master_port + 1 + r}" for n in range(topo.nodes) for r in range(topo.devices)]
