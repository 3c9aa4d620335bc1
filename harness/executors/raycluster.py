"""``--executor ray``: each cell a Ray task that runs it through ``launcher.run_cell`` on a node.

The task does not measure anything itself: it calls ``run_cell`` on the worker, so the
cell is still its own process with its own timeout, peak memory and crash capture, and
the ``CellOutcome`` travels back for the parent to record.  What crosses the wire:

* the environment as a change (``cellenv.delta``), rebuilt on the worker over its own
  variables (``cellenv.rebuild``): the parent's PATH or preloaded library paths may
  not exist there.  Ray's own variables (``RAY_*``, its OMP_NUM_THREADS=1) are dropped
  first, so the cell sees what a local cell sees, and the record describes the
  environment the worker built, not the parent's.
* the model files by path, not by content: every node must see the launching
  machine's files at the same paths (one host, or a shared filesystem).  Shipping a
  model through the object store would copy gigabytes per cell and still not cover the
  directories a checkpoint is; so the worker checks each file the payload names (same
  path, same size) and fails the cell with that reason when one differs.
* the cell's needs as task resources: its threads as CPUs (at most the largest node's,
  so an oversubscribed cell still runs as it would locally), ``num_gpus=1`` for a CUDA
  cell, ``NPU: 1`` for an Ascend one, and what ``--ray-resources`` adds (a node, an
  accelerator type, a label of the cluster's own).  A cell no node can take fails with
  that reason instead of waiting forever.

Ray is imported only here, and only when ``--executor ray`` connects.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.cells import cellenv
from dlbench.harness.cells.launcher import CellOutcome, run_cell
from dlbench.harness.executors.base import Needs, kill_children

CLIENT_PORT = 10001  # ray:// without a port: the Ray Client server's default
CONNECT_TIMEOUT_S = 5.0
# An HTTP/2 client's greeting and an empty SETTINGS frame; a server's first frame is SETTINGS.
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
H2_SETTINGS = 4
START_HINT = "start one with `ray start --head` (docs/how-to/ray-postgres.md)"
# A node's own label and an accelerator type are markers, one unit per node: a fraction
# asks for the node without taking it whole (Ray's convention).
MARKER_AMOUNT = 0.001
MARKERS = ("node:", "accelerator_type:")
RESERVED = ("CPU", "GPU", "NPU", "memory", "object_store_memory")
# A directory (a checkpoint, a SavedModel) is checked file by file up to this many files.
MAX_LISTED = 2000

_connected: str | None = None


def parse_resources(specs: list[str]) -> dict[str, float]:
    """``--ray-resources NAME[=AMOUNT][,...]`` -> {name: amount}; UserError on bad input."""
    out: dict[str, float] = {}
    for part in (p.strip() for s in specs for p in s.split(",")):
        if not part:
            continue
        name, sep, amount = part.partition("=")
        name = name.strip()
        if not name or name in RESERVED:
            raise UserError(
                f"--ray-resources {part!r}: expected NAME[=AMOUNT] with a name "
                f"other than {', '.join(RESERVED)} (threads and --device set those)"
            )
        try:
            value = float(amount) if sep else (MARKER_AMOUNT if name.startswith(MARKERS) else 1.0)
        except ValueError:
            value = -1.0
        if not value > 0:
            raise UserError(f"--ray-resources {part!r}: the amount must be a positive number")
        out[name] = value
    return out


def _host_port(address: str) -> tuple[str, int] | None:
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rstrip("/").rpartition(":")
    if not sep:
        return (rest, CLIENT_PORT) if address.startswith("ray://") else None
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        return None


def _shown(address: str | None) -> str:
    """The option as the user wrote it, for messages."""
    if not address:
        return "--executor ray"
    return f"--executor {address}" if address.startswith("ray://") else f"--executor ray={address}"


def check_address(address: str | None) -> None:
    if address and _host_port(address) is None:
        raise UserError(f"{_shown(address)}: expected HOST:PORT or ray://HOST:PORT")


def _resolve(address: str | None) -> str:
    """The address to join: as given, or (``ray`` alone) the cluster this machine runs."""
    if address:
        check_address(address)
        return address
    from ray._private import services

    try:
        found = services.canonicalize_bootstrap_address("auto")
    except Exception:  # noqa: BLE001 - Ray's own lookup failed: same as nothing found
        found = None
    if not found:
        raise UserError(
            f"--executor ray: no Ray cluster running on this machine; {START_HINT}, "
            f"or give its address: --executor ray=HOST:PORT"
        )
    return found


def _not_grpc(host: str, port: int) -> str | None:
    """Why HOST:PORT is no gRPC server (a Ray GCS or Ray Client server is one), or None.

    Ray's own client waits minutes for a GCS that is not there, or for one that is some
    other service, printing as it retries; an HTTP/2 greeting answered by the server's
    SETTINGS frame (its first, by the protocol) settles it in one round trip."""
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S) as conn:
            conn.settimeout(CONNECT_TIMEOUT_S)
            conn.sendall(H2_PREFACE)
            head = conn.recv(9)
    except OSError as exc:
        return str(exc.strerror or exc)
    return (
        None
        if len(head) >= 4 and head[3] == H2_SETTINGS
        else "something answers there, but not a Ray cluster"
    )


def connect(address: str | None, resources: list[str]) -> RayExecutor:
    """Join the cluster once per process (UserError, one line, when none answers there)."""
    global _connected
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install 'dlbench[ray]'") from None
    target = _resolve(address)
    shown = _shown(address)
    host, port = _host_port(target)
    why = _not_grpc(host, port)
    if why:
        raise UserError(f"{shown}: no Ray cluster at {host}:{port} ({why}); {START_HINT}")
    if _connected != target:
        if ray.is_initialized():
            ray.shutdown()
        # ray.init takes SIGTERM (exit 15, a C++ stack dump) and SIGINT; dlbench's own
        # handlers make them Ctrl-C, which ends the running cell and exits 130.
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            ray.init(address=target, logging_level=logging.ERROR, log_to_driver=False, namespace="dlbench")
        except Exception as exc:  # noqa: BLE001 - Ray raises several kinds; all mean the same
            lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()] or [repr(exc)]
            said = lines[0] if len(lines) == 1 else f"{lines[0]} {lines[-1]}"
            raise UserError(f"{shown}: could not join the Ray cluster at {target}: {said}") from None
        finally:
            if threading.current_thread() is threading.main_thread():
                for sig, handler in handlers.items():
                    signal.signal(sig, handler)
        _connected = target
    return RayExecutor(target, parse_resources(resources))


class RayExecutor:
    name = "ray"

    def __init__(self, address: str, resources: dict[str, float]):
        import ray

        self.address, self.resources = address, resources
        self._task = ray.remote(max_retries=0)(_cell_task)
        self._ref = None

    def _request(self, needs: Needs) -> dict[str, float]:
        """The task's resources, as Ray names them."""
        extra = {"GPU": 1.0} if needs.device == "cuda" else {"NPU": 1.0} if needs.device == "ascend" else {}
        return {"CPU": float(needs.cpus), **extra, **self.resources}

    def _fit(self, wanted: dict[str, float], node: str | None) -> tuple[dict | None, str]:
        """(the request with CPUs capped at the largest fitting node's, or None; why not)."""
        import ray

        nodes = [n for n in ray.nodes() if n.get("Alive") and (node is None or n["NodeID"] == node)]
        others = {k: v for k, v in wanted.items() if k != "CPU"}
        fits = [n for n in nodes if all(n["Resources"].get(k, 0) >= v for k, v in others.items())]
        if node and not nodes:
            return None, f"the node of the first repeat has left the Ray cluster at {self.address}"
        if not fits:
            offered = "; ".join(
                f"{n['NodeManagerAddress']}: "
                + ", ".join(
                    f"{k} {v:g}"
                    for k, v in sorted(n["Resources"].items())
                    if not k.startswith(("node:", "memory", "object_store"))
                )
                for n in nodes
            )
            asked = ", ".join(f"{k} {v:g}" for k, v in wanted.items())
            return None, (
                f"no node of the Ray cluster at {self.address} offers {asked}"
                + (f" (nodes: {offered})" if offered else " (no node is alive)")
            )
        most = max(n["Resources"].get("CPU", 0) for n in fits)
        return {**wanted, "CPU": min(wanted["CPU"], most)}, ""

    def run(self, kind, payload, *, env, timeout, needs):
        import ray
        from ray.exceptions import RayError
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        wanted = self._request(needs)
        fit, why = self._fit(wanted, needs.node)
        described = {"name": self.name, "address": self.address, "resources": fit or wanted}
        if fit is None:
            return CellOutcome("failed", error=f"cannot place the cell: {why}"), {"executor": described}
        rest = {k: v for k, v in fit.items() if k not in ("CPU", "GPU")}
        options: dict[str, Any] = {"num_cpus": fit["CPU"], "num_gpus": fit.get("GPU", 0), "resources": rest}
        if needs.node:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(needs.node, soft=False)
        self._ref = self._task.options(**options).remote(
            kind, payload, cellenv.delta(env), timeout, shared_files(payload)
        )
        try:
            outcome, ran = ray.get(self._ref)
        except RayError as exc:
            lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
            return CellOutcome(
                "failed",
                error=f"the Ray task failed: {type(exc).__name__}"
                + (f": {lines[-1].strip()}" if lines else ""),
                traceback=str(exc)[-4000:],
            ), {"executor": described}
        finally:
            self._ref = None
        ran["executor"] = {**described, **ran["executor"]}
        return outcome, ran

    def interrupt(self) -> None:
        """Cancel the task: the worker's ``_cell_task`` ends its cell on the way out."""
        import ray

        ref = self._ref
        if ref is not None:
            ray.cancel(ref)


# -- on the worker --------------------------------------------------------------------


def shared_files(payload: dict[str, Any]) -> dict[str, Any]:
    """Every absolute path the payload names that exists here -> its size in bytes (a
    directory: each file's, by relative path): what the worker must see the same."""
    found: dict[str, Any] = {}

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if k != "progress_path":
                    walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, str) and value.startswith("/") and value not in found:
            if os.path.isfile(value):
                found[value] = os.path.getsize(value)
            elif os.path.isdir(value):
                found[value] = _listing(value)

    walk(payload)
    return found


def _listing(root: str) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for here, _, names in os.walk(root):
        for name in names:
            path = os.path.join(here, name)
            if len(sizes) >= MAX_LISTED:
                return sizes
            if os.path.isfile(path):
                sizes[os.path.relpath(path, root)] = os.path.getsize(path)
    return sizes


def _missing(files: dict[str, Any], where: str) -> str | None:
    """Why the worker cannot read what the parent would have (None: it can)."""
    for path, want in files.items():
        wants = (
            {path: want}
            if isinstance(want, int)
            else {os.path.join(path, rel): size for rel, size in want.items()}
        )
        for p, size in wants.items():
            if not os.path.isfile(p):
                return (
                    f"{p}: not found on {where}; --executor ray reads model files at the "
                    f"launching machine's paths: every node needs them there (one host, "
                    f"or a shared filesystem mounted at the same path)"
                )
            if os.path.getsize(p) != size:
                return (
                    f"{p}: {os.path.getsize(p)} bytes on {where}, {size} on the launching "
                    f"machine (a stale or partial copy)"
                )
    return None


def _worker_base() -> dict[str, str]:
    """This worker's environment without what Ray added for its own workers."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("RAY_")
        and k != "SPT_NOENV"
        and not (k == "PYTHONBREAKPOINT" and v.startswith("ray."))
    }


def _node() -> dict[str, Any]:
    import ray

    from dlbench.harness.machine.fingerprint import fingerprint

    ctx = ray.get_runtime_context()
    node = {
        "node_id": ctx.get_node_id(),
        "ip": ray.util.get_node_ip_address(),
        "hostname": socket.gethostname(),
        "machine_id": fingerprint()["machine_id"],
    }
    gpus = ctx.get_accelerator_ids().get("GPU")
    return {**node, "gpus": list(gpus)} if gpus else node


def _cell_task(
    kind: str, payload: dict[str, Any], change: dict[str, Any], timeout: float | None, files: dict[str, Any]
) -> tuple[CellOutcome, dict]:
    """The Ray task: the cell through ``run_cell`` here, as the parent would have run it."""
    node = _node()
    ran: dict[str, Any] = {"executor": {"node": node}}
    where = f"node {node['hostname']} ({node['ip']})"
    try:
        env = cellenv.rebuild(change, _worker_base())
    except UserError as exc:  # e.g. the allocator's library is missing here
        return CellOutcome("failed", error=f"{exc} (on {where})"), ran
    ran.update(cellenv.context(env))
    problem = _missing(files, where)
    if problem:
        return CellOutcome("failed", error=problem), ran
    progress = payload.get("progress_path")
    if progress and not os.path.isdir(os.path.dirname(progress)):
        payload = {**payload, "progress_path": None}  # another host: no live progress
    try:
        return run_cell(kind, payload, env=env, timeout=timeout), ran
    except BaseException:
        kill_children()  # cancelled: the cell must not outlive its task
        raise
