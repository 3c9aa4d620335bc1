"""``--executor ray`` against a real Ray cluster this module starts on 127.0.0.1.

One cluster for the module (``ray start --head --block`` in its own session, its
session files in a temporary directory), stopped by signalling that session: never
``ray stop``, which would end every Ray cluster of this user on the machine.  The
CLI runs as a user runs it (conftest's ``cli``), so the Ray driver lives in the
dlbench process and the cells in the cluster's workers.
"""

import http.server
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.utils import benchmodels
from tests.utils.clitools import assert_usage_error as _one_line_error

FAST = ("--min-duration", "0.2", "--min-iterations", "5", "--warmup", "2", "--max-warmup", "10")
# Ray advertises a node by its outward address even when told 127.0.0.1; with this off
# (its switch for laptops) every process of the test cluster, and the driver, stays on
# the loopback interface.
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
SAME = (
    "cell_key",
    "status",
    "model",
    "backend",
    "device",
    "precision",
    "batch_size",
    "scenario",
    "threads",
    "model_path",
    "machine_id",
    "iterations",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to ``ray start --block`` alone: it drains the node and ends what it started
    (signalling them all at once leaves it waiting for a GCS that is gone); then the rest
    of its session, if anything is left."""
    proc.terminate()
    try:
        proc.wait(40)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait(10)


@pytest.fixture(scope="module")
def cluster():
    """(address, the ``ray start`` process) of a two-CPU head node on 127.0.0.1, on ports
    of its own: another cluster on the machine may hold Ray's defaults.  Its Ray Client
    server (``ray://``, handed to ``ray.init`` as it is) is left unused: under load its
    proxy forks a per-client server that may not come up within Ray's 30 s."""
    port, client = _free_port(), _free_port()
    tmp = tempfile.mkdtemp(prefix="dlray-", dir="/tmp")  # short: Ray's socket paths
    log = open(os.path.join(tmp, "start.log"), "w+")
    ray = str(Path(sys.executable).with_name("ray"))
    proc = subprocess.Popen(
        [
            ray,
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            f"--ray-client-server-port={client}",
            "--num-cpus=2",
            "--num-gpus=0",
            "--include-dashboard=false",
            f"--temp-dir={tmp}",
            "--disable-usage-stats",
            "--object-store-memory=100000000",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(os.environ, **LOOPBACK),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in Path(log.name).read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("ray start failed:\n" + Path(log.name).read_text()[-3000:])
            time.sleep(0.2)
        yield f"127.0.0.1:{port}", proc
    finally:
        _stop(proc)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def ray_cli(cli, cluster):
    def run(*args, env=None, **kw):
        return cli(*args, env={**LOOPBACK, **(env or {})}, process=True, **kw)

    return run


@pytest.fixture
def mlp(workdir):
    return benchmodels.mlp(workdir / "mlp.onnx")


def _rows(workdir):
    con = sqlite3.connect(workdir / "results.sqlite")
    con.row_factory = sqlite3.Row
    rows = con.execute("SELECT * FROM records ORDER BY id").fetchall()
    con.close()
    return rows


def test_a_sweep_on_ray_stores_the_records_a_local_sweep_stores(ray_cli, cluster, workdir, mlp):
    address, _ = cluster
    args = (
        "bench",
        str(mlp),
        "-b",
        "onnxruntime",
        "--batch-sizes",
        "1,4",
        "--threads",
        "1",
        *FAST,
        "--iqr-threshold",
        "100",
    )
    local = ray_cli(*args, "--json", "local.json")
    assert local.returncode == 0, local.stderr[-3000:]
    out = ray_cli(*args, "--executor", f"ray={address}", "--json", "ray.json")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Throughput" in out.stdout and "[2/2]" in out.stderr
    here = json.loads((workdir / "local.json").read_text())
    there = json.loads((workdir / "ray.json").read_text())
    assert [r["batch_size"] for r in there] == [1, 4]
    for a, b in zip(here, there):
        assert {k: a[k] for k in SAME if k != "iterations"} == {k: b[k] for k in SAME if k != "iterations"}
        assert b["status"] == "ok" and b["throughput_sps"] > 0 and b["peak_rss_mb"] > 20
        ca, cb = a["context"], b["context"]
        assert cb["identity"] == ca["identity"] and cb["runtime"] == ca["runtime"]
        # the worker rebuilt the environment: Ray's OMP_NUM_THREADS=1 did not leak through
        assert cb["thread_environment"] == ca["thread_environment"]
        assert cb["allocator"] == ca["allocator"] and cb["allocator"]["name"] == "tuned"
        assert ca["executor"]["name"] == "local"
        ex = cb["executor"]
        assert ex["name"] == "ray" and ex["address"] == address
        assert ex["resources"] == {"CPU": 1.0}
        assert ex["node"]["ip"] == "127.0.0.1" and len(ex["node"]["node_id"]) == 56
        assert ex["node"]["hostname"] == socket.gethostname()
        assert len(ex["node"]["machine_id"]) == 16
    rows = _rows(workdir)
    assert [r["id"] for r in there] == [row["id"] for row in rows[2:]]
    assert [json.loads(row["context"])["executor"]["name"] for row in rows] == [
        "local",
        "local",
        "ray",
        "ray",
    ]


def test_a_crashing_and_a_hanging_cell_on_ray_fail_while_the_sweep_goes_on(ray_cli, cluster, workdir, mlp):
    address, proc = cluster
    on_ray = ("--executor", f"ray={address}")
    out = ray_cli(
        "bench",
        str(mlp),
        "-b",
        "selftest",
        "--batch-sizes",
        "1,2,4",
        "-O",
        "fail=segfault",
        "-O",
        "fail_batch=2",
        *FAST,
        *on_ray,
        "--json",
        "crash.json",
    )
    assert out.returncode == 1, out.stderr[-3000:]
    records = json.loads((workdir / "crash.json").read_text())
    assert [r["status"] != "failed" for r in records] == [True, False, True]
    assert "segmentation fault" in records[1]["error"]
    assert records[1]["context"]["executor"]["node"]["ip"] == "127.0.0.1"

    t0 = time.monotonic()
    out = ray_cli(
        "bench",
        str(mlp),
        "-b",
        "selftest",
        "--batch-sizes",
        "1,2",
        "-O",
        "fail=hang",
        "-O",
        "fail_batch=1",
        "--timeout",
        "3",
        *FAST,
        *on_ray,
        "--json",
        "hang.json",
    )
    assert out.returncode == 1 and time.monotonic() - t0 < 60
    records = json.loads((workdir / "hang.json").read_text())
    assert [r["status"] != "failed" for r in records] == [False, True]
    assert "timed out after 3 s" in records[0]["error"]
    assert not _cells_of(proc)  # the hung cell's process was killed on the worker


def _cells_of(proc) -> list[psutil.Process]:
    """The cell processes the cluster's workers are running now."""
    found = []
    for p in psutil.Process(proc.pid).children(recursive=True):
        try:
            if "dlbench.harness.cells.cell" in " ".join(p.cmdline()):
                found.append(p)
        except psutil.Error:
            pass
    return found


def test_an_interrupted_sweep_on_ray_ends_its_cell_on_the_worker(cluster, workdir, mlp):
    address, proc = cluster
    sweep = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dlbench.harness",
            "bench",
            str(mlp),
            "-b",
            "selftest",
            "-O",
            "service_ms=20",
            "--batch-sizes",
            "1,2",
            "--min-duration",
            "60",
            "--no-progress",
            "--executor",
            f"ray={address}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **LOOPBACK),
    )
    deadline = time.monotonic() + 60
    while not _cells_of(proc) and time.monotonic() < deadline and sweep.poll() is None:
        time.sleep(0.2)
    assert _cells_of(proc), sweep.communicate(timeout=60)
    sweep.send_signal(signal.SIGTERM)  # as Ctrl-C: dlbench's own handler
    _, err = sweep.communicate(timeout=60)
    assert sweep.returncode == 130 and err.strip().endswith("interrupted"), err[-2000:]
    deadline = time.monotonic() + 20
    while _cells_of(proc) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _cells_of(proc)


def test_resume_on_ray_skips_the_cells_stored_locally_and_on_ray(ray_cli, cluster, workdir, mlp):
    address, _ = cluster
    args = ("bench", str(mlp), "-b", "selftest", *FAST, "-O", "fail=raise", "-O", "fail_batch=2")
    first = ray_cli(*args, "--batch-sizes", "1,2")  # local: 1 ok, 2 failed
    assert first.returncode == 1
    # 'ray' alone joins the cluster $RAY_ADDRESS names, as Ray's own tools do
    out = ray_cli(
        *args,
        "--batch-sizes",
        "1,2,4",
        "--resume",
        "--executor",
        "ray",
        "--json",
        "r.json",
        env={"RAY_ADDRESS": address},
    )
    assert out.returncode == 1, out.stderr[-3000:]
    records = json.loads((workdir / "r.json").read_text())
    assert [(r["batch_size"], r.get("resumed", False)) for r in records] == [
        (1, True),
        (2, False),
        (4, False),
    ]
    assert "1 of 3 cells already" in out.stderr
    assert records[2]["context"]["executor"]["address"] == address
    again = ray_cli(
        *args, "--batch-sizes", "1,4,8", "--resume", "--executor", f"ray={address}", "--json", "again.json"
    )
    assert again.returncode == 0 and "2 of 3 cells already" in again.stderr, again.stderr
    records = json.loads((workdir / "again.json").read_text())
    assert [r.get("resumed", False) for r in records] == [True, True, False]
    assert [row["batch_size"] for row in _rows(workdir)] == [1, 2, 2, 4, 8]


def test_cells_ask_for_what_they_name_and_one_no_node_has_fails_alone(ray_cli, cluster, workdir, mlp):
    address, _ = cluster
    out = ray_cli(
        "bench",
        str(mlp),
        "-b",
        "selftest",
        "--threads",
        "1,2,8",
        "--repeats",
        "2",
        *FAST,
        "--executor",
        f"ray={address}",
        "--ray-resources",
        "node:127.0.0.1",
        "--json",
        "pin.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    records = json.loads((workdir / "pin.json").read_text())
    # 8 threads on two-CPU nodes: the task takes the largest node's CPUs, as a local run would
    assert [r["context"]["executor"]["resources"] for r in records] == [
        {"CPU": c, "node:127.0.0.1": 0.001} for c in (1.0, 2.0, 2.0)
    ]
    assert all(len(r["metrics"]["repeats"]) == 2 for r in records)
    out = ray_cli(
        "bench",
        str(mlp),
        "-b",
        "selftest",
        "--batch-sizes",
        "1,2",
        "--threads",
        "1",
        *FAST,
        "--executor",
        f"ray={address}",
        "--ray-resources",
        "big_box",
        "--json",
        "none.json",
    )
    assert out.returncode == 1
    records = json.loads((workdir / "none.json").read_text())
    assert [r["status"] for r in records] == ["failed", "failed"]
    assert records[0]["error"].startswith(
        f"cannot place the cell: no node of the Ray cluster at {address} offers CPU 1, big_box 1 "
        f"(nodes: 127.0.0.1: CPU 2)"
    )


def test_bad_executor_input_is_one_line_and_exit_2(cli, workdir, mlp):
    closed = _free_port()
    base = ("bench", str(mlp), "-b", "selftest")
    out = cli(*base, "--executor", f"ray=127.0.0.1:{closed}", timeout=60, env=LOOPBACK)
    _one_line_error(out, f"no Ray cluster at 127.0.0.1:{closed}", "ray start --head")
    # a port where something else listens: Ray's own client would retry for minutes
    with http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler) as web:
        threading.Thread(target=web.serve_forever, daemon=True).start()
        port = web.server_address[1]
        out = cli(*base, "--executor", f"ray=127.0.0.1:{port}", timeout=60, env=LOOPBACK)
        web.shutdown()
    _one_line_error(out, f"no Ray cluster at 127.0.0.1:{port} (something answers there")
    for args, needle in (
        (("--executor", "spark"), "choose local or ray"),
        (("--executor", "ray=nowhere"), "expected HOST:PORT or ray://HOST:PORT"),
        (("--executor", "ray://h:port"), "expected HOST:PORT or ray://HOST:PORT"),
        (("--executor", "local=1.2.3.4:1"), "only ray takes an address"),
        (("--ray-resources", "node:1.2.3.4"), "--ray-resources applies to --executor ray"),
        (("--executor", "ray=h:1", "--ray-resources", "CPU=4"), "other than CPU"),
        (("--executor", "ray=h:1", "--ray-resources", "gpu=-1"), "positive number"),
        (("--executor", "ray=h:1", "--device-id", "1"), "Ray gives each GPU cell"),
    ):
        _one_line_error(cli(*base, *args), needle)
    out = cli(*base, "--executor", "ray=10.0.0.5:6379", "--print-config")
    assert out.returncode == 0 and 'executor = "ray=10.0.0.5:6379"' in out.stdout
    out = cli("run", "lenet5", "--executor", "ray=10.0.0.5:6379", "--workdir", "w", "--print-steps")
    bench = [line for line in out.stdout.splitlines() if line.startswith("dlbench bench")]
    assert out.returncode == 0 and bench and bench[0].endswith("--executor ray=10.0.0.5:6379")
    out = cli(
        "run", "lenet5", "--executor", f"ray=127.0.0.1:{closed}", "--workdir", "w2", timeout=120, env=LOOPBACK
    )
    _one_line_error(out, f"no Ray cluster at 127.0.0.1:{closed}")
    assert not (workdir / "w2").exists()


def test_the_worker_rebuilds_the_environment_and_checks_the_files():
    """What a remote node does, without one: the environment's change laid over another
    machine's variables, and a model file that differs there."""
    from dlbench.harness.cells import cellenv
    from dlbench.harness.cells.threads import ThreadConfig
    from dlbench.harness.executors.raycluster import _missing, shared_files

    parent = {"PATH": "/parent/bin", "MALLOC_CONF": "x", "KMP_BLOCKTIME": "0", "HOME": "/p"}
    env = cellenv.cell_environment(ThreadConfig(3), "tuned", {"TF_X": "1"}, base=parent)
    change = cellenv.delta(env, parent)
    assert change["allocator"] == "tuned" and "PATH" not in change["set"]
    worker = {"PATH": "/worker/bin", "OMP_NUM_THREADS": "1", "MALLOC_CONF": "y", "HOME": "/w"}
    there = cellenv.rebuild(change, worker)
    assert there["PATH"] == "/worker/bin" and there["TF_X"] == "1"
    assert cellenv.context(there) == cellenv.context(env)
    assert there["KMP_BLOCKTIME"] == "0" and "MALLOC_CONF" not in there

    with tempfile.TemporaryDirectory() as d:
        model, ckpt = Path(d, "m.onnx"), Path(d, "ckpt")
        model.write_bytes(b"12345")
        (ckpt / "sub").mkdir(parents=True)
        (ckpt / "sub" / "w.bin").write_bytes(b"1")
        payload = {
            "artifact": {"path": str(model), "checkpoint": str(ckpt)},
            "progress_path": str(model),
            "given": {"x": {"file": "/no/such.npy"}},
        }
        files = shared_files(payload)
        assert files == {str(model): 5, str(ckpt): {os.path.join("sub", "w.bin"): 1}}
        assert _missing(files, "node n") is None
        model.write_bytes(b"123")
        assert _missing(files, "node n") == (
            f"{model}: 3 bytes on node n, 5 on the launching machine (a stale or partial copy)"
        )
        (ckpt / "sub" / "w.bin").unlink()
        model.write_bytes(b"12345")
        assert _missing(files, "node n").startswith(
            f"{ckpt / 'sub' / 'w.bin'}: not found on node n; --executor ray reads model files"
        )


def test_a_cell_asks_for_its_device_and_markers_ask_for_a_share_of_a_node():
    """What a GPU or NPU cell's task asks of Ray (no GPU here to run one on)."""
    from dlbench.harness.executors import Needs
    from dlbench.harness.executors.raycluster import RayExecutor, parse_resources

    wanted = parse_resources(["accelerator_type:H100", "node:10.0.0.5,big=2"])
    assert wanted == {"accelerator_type:H100": 0.001, "node:10.0.0.5": 0.001, "big": 2.0}
    ex = RayExecutor.__new__(RayExecutor)  # its asking, without joining a cluster
    ex.resources = wanted
    assert ex._request(Needs(4, "cuda")) == {"CPU": 4.0, "GPU": 1.0, **wanted}
    assert ex._request(Needs(1, "ascend")) == {"CPU": 1.0, "NPU": 1.0, **wanted}
    assert ex._request(Needs(2, "cpu")) == {"CPU": 2.0, **wanted}
