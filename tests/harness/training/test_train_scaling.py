"""Data-parallel training cells (``dlbench train --devices``), through the real CLI and
each framework's own launcher: torchrun, TF_CONFIG workers, msrun.

On this CPU a device is one process; the frameworks run in the CLI's cell processes,
so this file belongs to the core group.
"""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest

from dlbench.core.errors import UserError
from dlbench.harness.output.tables import scaling_table
from dlbench.harness.training import gather, scaling
from tests.utils.clitools import assert_usage_error

STEPS = 3
BATCH = 16


def _records(workdir, name):
    return json.loads((workdir / name).read_text())


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow", "mindspore"])
def test_one_and_two_devices_record_every_rank(cli, workdir, framework):
    out = cli(
        "train",
        "lenet5",
        "-f",
        framework,
        "--devices",
        "1,2",
        "--steps",
        str(STEPS),
        "--warmup-steps",
        "1",
        "--batch-size",
        str(BATCH),
        "--json",
        "dp.json",
        "--timeout",
        "300",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    one, two = _records(workdir, "dp.json")
    for r, n in ((one, 1), (two, 2)):
        m, c = r["metrics"], r["context"]
        assert r["status"] == "ok" and r["batch_size"] == BATCH, (r["error"], r["context"].get("log_tail"))
        assert c["topology"]["world_size"] == n and c["identity"]["devices"] == n
        assert c["scaling"] == {"mode": "weak", "per_device_batch": BATCH, "global_batch": BATCH * n}
        assert c["resource"].startswith(f"{n} CPU process")
        assert [k["rank"] for k in m["ranks"]] == list(range(n))
        # Global samples over the span from the first rank's start to the last one's end.
        span = max(k["end_s"] for k in m["ranks"]) - min(k["start_s"] for k in m["ranks"])
        assert r["throughput_sps"] == pytest.approx(STEPS * BATCH * n / span, rel=1e-6)
        assert m["weights_drift"] <= gather.SYNC_TOLERANCE
        assert m["rank_step_time_min_s"] <= m["step_time_s"]["p50"] <= m["rank_step_time_max_s"]
        assert c["runtime"]["world_size"] == n and c["runtime"]["launcher"]
        if n == 2:  # each rank pinned to its own core, on its own data
            assert c["runtime"]["cpus"] and len(c["runtime"]["cpus"]) == 1
            assert len({k["loss_end"] for k in m["ranks"]}) == 2
    # The checkpoint of the data-parallel cell is the bare model, as a one-process run's.
    manifest = json.loads((workdir / "runs" / "lenet5" / f"{framework}-2dev" / "manifest.json").read_text())
    assert manifest["framework"] == framework
    assert "Speedup" in out.stdout and "T_N/T_1" in out.stdout
    efficiency = two["throughput_sps"] / (2 * one["throughput_sps"])
    assert f"{efficiency:.2f}" in out.stdout.splitlines()[3]
    # compare pairs the two cells along the device axis, though their threads differ
    cmp = cli("compare", "--devices", "1", "--devices", "2", "--json", "cmp.json")
    assert cmp.returncode == 0, cmp.stderr
    [pair] = json.loads((workdir / "cmp.json").read_text())["pairs"]
    assert pair["baseline"]["throughput_sps"] == one["throughput_sps"]


# dlbench as a terminal starts it: with Ctrl-C's default action.  A suite started in the
# background of a non-interactive shell (`make test &`) hands every child SIGINT ignored,
# and Python then installs no KeyboardInterrupt handler, so the Ctrl-C test would
# interrupt nothing.
_INTERRUPTIBLE = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, "
    "signal.default_int_handler); sys.argv[0] = 'dlbench'; "
    "runpy.run_module('dlbench.harness', run_name='__main__')"
)


def _start(workdir, *args, db=None):
    env = dict(os.environ, **({"DLBENCH_DB": str(db)} if db else {}))
    return subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTIBLE, *args],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _rank_processes():
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "train_rank" in cmd and "dlbench.harness.cells.cell" in cmd:
            found.append(p)
    return found


def _wait_for_rank(rank: int, deadline: float = 120):
    end = time.time() + deadline
    while time.time() < end:
        for p in _rank_processes():
            try:
                if p.environ().get("RANK") == str(rank):
                    return p
            except psutil.Error:
                continue
        time.sleep(0.2)
    raise AssertionError(f"rank {rank} never started")


@pytest.mark.parametrize("fault", ["crash", "hang"])
def test_a_failed_rank_fails_its_cell_kills_its_peers_and_the_sweep_goes_on(workdir, fault):
    """A rank killed mid-run (crash) or stopped (hang): the cell fails with the reason,
    no rank outlives it, and the next cell of the sweep still runs."""
    # Long enough for the fault to land mid-run, short enough for the one-device cell to
    # finish well inside the hang's timeout on a loaded machine.  One thread per rank: the
    # one-device cell would otherwise run two OpenMP threads on two busy cores, whose
    # spinning barriers made it 28x slower under load (54 s, past the timeout, in CI).
    # The hang costs its whole timeout in waiting: 15 s, three times what the one-device
    # cell takes on a test worker's core (~5 s, start-up included).
    proc = _start(
        workdir,
        "train",
        "lenet5",
        "-f",
        "pytorch",
        "--devices",
        "2,1",
        "--threads",
        "1",
        "--steps",
        "600",
        "--warmup-steps",
        "1",
        "--batch-size",
        "8",
        "--timeout",
        "15" if fault == "hang" else "300",
        "--json",
        "dp.json",
    )
    victim = _wait_for_rank(1)
    time.sleep(3)  # into the measured steps
    victim.send_signal(signal.SIGKILL if fault == "crash" else signal.SIGSTOP)
    try:
        _, err = proc.communicate(timeout=400)
    finally:
        proc.kill()
    two, one = _records(workdir, "dp.json")
    assert two["status"] == "failed", two
    if fault == "hang":
        assert "timed out after 15 s" in two["error"]
    else:  # the launcher's word, the dead rank's, or a peer's broken connection
        assert two["error"]
    assert one["status"] == "ok", (one["error"], one["context"].get("log_tail"))
    assert one["context"]["topology"]["world_size"] == 1
    assert not _rank_processes(), "a rank outlived its cell"
    assert not (workdir / "runs" / "lenet5" / "pytorch-2dev").exists()


def test_ctrl_c_ends_the_launcher_and_its_ranks(workdir):
    """A launcher has no parent-death signal of its own: interrupting dlbench must end
    torchrun and its ranks, not leave them training for nobody."""
    proc = _start(
        workdir,
        "train",
        "lenet5",
        "-f",
        "pytorch",
        "--devices",
        "2",
        "--steps",
        "100000",
        "--warmup-steps",
        "1",
        "--batch-size",
        "8",
    )
    _wait_for_rank(1)
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-2000:]
    time.sleep(1)
    assert not _rank_processes(), "a rank outlived an interrupted dlbench"


def test_chosen_ports_are_free_distinct_and_below_the_ephemeral_range():
    """A rendezvous port inside the ephemeral range can be taken by anyone's outgoing
    connection before the launcher binds it; a taken candidate is skipped."""
    low = scaling._ephemeral_low()
    ports = scaling.free_ports(3)
    assert len(set(ports)) == 3 and all(scaling.PORT_FLOOR <= p < low for p in ports)
    with socket.socket() as held:
        held.bind((scaling.LOOPBACK, ports[0]))

        class Fixed:
            def sample(self, population, k):
                return [ports[0], ports[1]]

        assert scaling.free_ports(1, Fixed()) == [ports[1]]
        with pytest.raises(UserError, match="free ports"):
            scaling.free_ports(2, Fixed())


def test_two_nodes_on_loopback_make_one_record(workdir):
    """Two dlbench processes as two nodes of one device each: node 0 stores the cell,
    with both ranks; node 1 stores nothing and says so."""
    port = scaling.free_port()
    common = (
        "train",
        "lenet5",
        "-f",
        "pytorch",
        "--devices",
        "1",
        "--nodes",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(port),
        "--steps",
        str(STEPS),
        "--warmup-steps",
        "1",
        "--batch-size",
        str(BATCH),
        "--timeout",
        "300",
        "--threads",
        "1",
    )
    (workdir / "n1").mkdir()
    node1_db = workdir / "n1" / "results.sqlite"
    node1 = _start(workdir / "n1", *common, "--node-rank", "1", db=node1_db)
    node0 = _start(workdir, *common, "--node-rank", "0", "--json", "n0.json")
    out0, err0 = node0.communicate(timeout=300)
    out1, err1 = node1.communicate(timeout=300)
    assert node0.returncode == 0, err0[-3000:]
    assert node1.returncode == 0, err1[-3000:]
    [r] = _records(workdir, "n0.json")
    assert r["status"] == "ok" and r["context"]["topology"]["nodes"] == 2
    assert [k["rank"] for k in r["metrics"]["ranks"]] == [0, 1]
    assert r["context"]["resource"].startswith("2 CPU processes") and r["context"]["resource"].endswith(
        "on 2 nodes"
    )
    assert "node 1 done; node 0 stores the record" in err1
    assert sqlite3.connect(node1_db).execute("SELECT count(*) FROM records").fetchone() == (0,)
    assert not (workdir / "n1" / "runs" / "lenet5" / "pytorch-2dev").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        (("--devices", "0"), "--devices must be at least 1"),
        (("--devices", "2", "--nodes", "2"), "--master-port"),
        (
            ("--devices", "2", "--nodes", "2", "--node-rank", "2", "--master-port", "29000"),
            "--node-rank must be in [0, 2)",
        ),
        (("--devices", "2", "--scaling", "strong", "--batch-size", "7"), "does not split evenly"),
        (("--devices", "1", "--nodes", "2", "--master-port", "29000", "-f", "tensorflow"), "--node-addrs"),
        (
            (
                "--nodes",
                "2",
            ),
            "--nodes needs --devices",
        ),
    ],
)
def test_bad_topologies_are_refused_before_anything_runs(cli, args, needle):
    out = (
        cli("train", "lenet5", "-f", "pytorch", *args) if "-f" not in args else cli("train", "lenet5", *args)
    )
    assert_usage_error(out, needle)


class _Ranks:
    """The gathered rows of two ranks, as a framework's collective would return them."""

    rank, world_size = 0, 2

    def __init__(self, rows, batch=4):
        self.rows = np.array(rows, np.float64)
        self.cfg = type("Cfg", (), {"batch_size": batch})

    def all_gather(self, row):
        assert len(row) == self.rows.shape[1]
        return self.rows

    def weights_sum(self):
        return self.rows[0, gather.WEIGHTS]


def _row(rank, start, end, steps, weights=10.0):
    return [
        rank,
        *gather._split(start),
        *gather._split(end),
        end - start,
        0.0,
        100.0 + rank,
        1.0,
        weights,
        *steps,
    ]


def test_combine_takes_the_span_across_ranks_and_the_slowest_rank_per_step():
    t0 = 1_795_000_000.25  # epoch seconds survive the float32-safe split exactly
    table = [_row(1, t0 + 0.5, t0 + 2.5, [0.6, 1.0]), _row(0, t0, t0 + 2.0, [0.9, 0.8])]
    metrics = {
        "step_times_s": [0.9, 0.8],
        "window_s": 2.0,
        "data_time_s": [0.0, 0.0],
        "loss_end": 1.0,
        "throughput_sps": 4.0,
    }
    out = gather.combine(_Ranks(table), metrics, t0, t0 + 2.0)
    assert out["throughput_sps"] == pytest.approx(2 * 2 * 4 / 2.5)
    assert out["step_times_s"] == [0.9, 1.0]
    assert [r["rank"] for r in out["ranks"]] == [0, 1]
    assert out["ranks"][1]["start_s"] == pytest.approx(0.5, abs=1e-6)
    assert out["rank_step_time_min_s"] == 0.6 and out["rank_step_time_max_s"] == 1.0
    assert out["peak_rss_mb_max"] == 101.0 and out["global_batch"] == 8


def test_combine_fails_the_cell_when_the_ranks_weights_drift_apart():
    table = [_row(0, 1.0, 2.0, [0.1], weights=10.0), _row(1, 1.0, 2.0, [0.1], weights=10.5)]
    metrics = {
        "step_times_s": [0.1],
        "window_s": 1.0,
        "data_time_s": [0.0],
        "loss_end": 1.0,
        "throughput_sps": 4.0,
    }
    with pytest.raises(RuntimeError, match="gradients were not averaged"):
        gather.combine(_Ranks(table), metrics, 1.0, 2.0)


def _scaling_record(n, throughput, framework="pytorch"):
    return {
        "status": "ok",
        "model": "lenet5",
        "framework": framework,
        "framework_version": "x",
        "precision": "fp32",
        "batch_size": 16,
        "machine_id": "m",
        "throughput_sps": throughput,
        "device": "cpu",
        "context": {
            "topology": {"world_size": n},
            "scaling": {"mode": "weak"},
            "resource": f"{n} CPU processes",
            "config": {"data": "synthetic"},
        },
        "metrics": {"rank_step_time_min_s": 0.01, "rank_step_time_max_s": 0.02},
    }


def test_scaling_table_speedup_is_the_mindspore_pages_efficiency():
    """13689/(8*1787) = 0.9575, printed 0.96 here (the page truncates to 0.95)."""
    text = scaling_table(
        [_scaling_record(1, 1787.0), _scaling_record(8, 13689.0), _scaling_record(8, 500.0, "tensorflow")]
    )
    rows = text.splitlines()
    assert "| 0.96 " in rows[3] and "| 7.66 " in rows[3]
    assert "| 1.00 " in rows[2]
    assert rows[4].count("|  ") >= 2  # no one-device cell: no speedup guessed
    assert "Speedup = T_N/(N·T_1)" in text


def test_topology_ports_and_batches():
    topo = scaling.Topology(
        2,
        nodes=2,
        node_rank=1,
        master_addr="10.0.0.1",
        master_port=29000,
        node_addrs=("10.0.0.1", "10.0.0.2"),
    )
    assert topo.world_size == 4
    assert scaling.tf_workers(topo) == [
        "10.0.0.1:29001",
        "10.0.0.1:29002",
        "10.0.0.2:29001",
        "10.0.0.2:29002",
    ]
    assert scaling.split_batch(32, 4, "strong") == 8
    assert scaling.split_batch(32, 4, "weak") == 32


@pytest.mark.gpu
def test_gpu_cells_join_over_nccl_one_gpu_per_rank(cli, workdir):
    """The GPU path is the CPU path's code with NCCL: torchrun, one GPU per local rank."""
    out = cli(
        "train",
        "lenet5",
        "-f",
        "pytorch",
        "--device",
        "gpu",
        "--devices",
        "1",
        "--steps",
        str(STEPS),
        "--warmup-steps",
        "1",
        "--json",
        "gpu.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [r] = _records(workdir, "gpu.json")
    runtime = r["context"]["runtime"]
    assert runtime["backend"] == "nccl" and runtime["device"] == "cuda:0"
    assert "×" in r["context"]["resource"] and "CPU" not in r["context"]["resource"]
