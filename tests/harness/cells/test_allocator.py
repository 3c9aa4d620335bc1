"""``--allocator``: applied in the cell before anything loads, recorded in every record's
context, and the kernel-time flag on cells that page (real cells, real bench records)."""

import json

import pytest

from dlbench.core.errors import UserError
from dlbench.harness.cells import allocator
from dlbench.harness.cells.cellenv import cell_environment
from dlbench.harness.cells.launcher import run_cell
from dlbench.harness.cells.threads import ThreadConfig
from tests.utils import benchmodels, tiny_onnx
from tests.utils.clitools import assert_usage_error

FAST = ("--min-duration", "0.3", "--min-iterations", "5", "--warmup", "2", "--max-warmup", "5")
# A preload or malloc setting the user's shell may carry: "system" must not inherit it.
INHERITED = {
    "MALLOC_ARENA_MAX": "2",
    "MALLOC_CONF": "narenas:1",
    "TCMALLOC_RELEASE_RATE": "5",
    "GLIBC_TUNABLES": "glibc.malloc.tcache_count=0:glibc.elision.enable=0",
}


def _need(name: str) -> None:
    """Only jemalloc/tcmalloc may skip, and only when Debian's library is absent."""
    if name in allocator.LIBRARIES:
        try:
            allocator.library(name)
        except UserError as exc:
            pytest.skip(str(exc))


@pytest.mark.parametrize("name", allocator.ALLOCATORS)
def test_the_cell_starts_with_its_allocator(name, monkeypatch):
    _need(name)
    for k, v in INHERITED.items():
        monkeypatch.setenv(k, v)
    if allocator.LIBRARIES.get(name):
        other = "tcmalloc" if name == "jemalloc" else "jemalloc"
        _need(other)
        monkeypatch.setenv("LD_PRELOAD", allocator.library(other))  # inherited: dropped
    env = cell_environment(ThreadConfig(1), name)
    out = run_cell("selftest", {"action": "environment"}, env=env)
    assert out.ok, out.error
    seen, mapped = out.result["environ"], out.result["mapped"]
    steering = {k: v for k, v in seen.items() if k.startswith(allocator.PREFIXES)}
    assert steering == allocator.SETTINGS[name]
    assert seen["GLIBC_TUNABLES"] == "glibc.elision.enable=0"  # not a malloc tunable: kept
    assert seen[allocator.MARKER] == name and seen["OMP_NUM_THREADS"] == "1"
    allocs = [m for m in mapped if "jemalloc" in m or "tcmalloc" in m]
    if name in allocator.LIBRARIES:
        assert allocs == [allocator.library(name)] and seen["LD_PRELOAD"] == allocs[0]
    else:
        assert allocs == [] and "LD_PRELOAD" not in seen


@pytest.mark.parametrize("name", sorted(allocator.LIBRARIES))
def test_a_library_that_frees_past_the_preload_is_said_so(name):
    """OpenVINO 2026.4 aborted in every cell under a preloaded jemalloc or tcmalloc ("killed
    by signal SIGABRT", half of a tune's points): its plugin hands the preload's blocks to
    glibc's own free.  The cell doing the same gets the reason and the way out."""
    _need(name)
    out = run_cell("selftest", {"action": "foreign_free"}, env=cell_environment(ThreadConfig(1), name))
    assert out.status == "failed" and "SIGABRT" in out.error, out.error
    assert "free(): invalid pointer" in out.error and f"under the preloaded {name}" in out.error
    assert "--allocator tuned or system runs it" in out.error
    # Without a preload both are glibc's: nothing breaks, nothing to explain.
    assert run_cell("selftest", {"action": "foreign_free"}, env=cell_environment(ThreadConfig(1), "tuned")).ok


def test_a_preload_the_dynamic_linker_ignores_fails_the_cell():
    _need("jemalloc")
    env = cell_environment(ThreadConfig(1), "jemalloc")
    env["LD_PRELOAD"] = "/nonexistent/libjemalloc.so.2"
    out = run_cell("selftest", {"action": "environment"}, env=env)
    assert out.status == "failed" and "was not loaded into the cell" in out.error


def test_a_missing_library_names_the_debian_package(monkeypatch):
    monkeypatch.setitem(allocator.LIBRARIES, "tcmalloc", ("libdlbench-absent.so.4", "libtcmalloc-minimal4"))
    with pytest.raises(
        UserError,
        match=r"libdlbench-absent.so.4 not found; install Debian's "
        r"libtcmalloc-minimal4 \(apt-get install",
    ):
        allocator.check("tcmalloc")


@pytest.mark.parametrize(
    "command",
    [("bench", "M.onnx", "-b", "selftest"), ("train", "lenet5"), ("run", "lenet5", "--print-steps")],
)
def test_unknown_allocator_is_one_line(cli, workdir, command):
    benchmodels.mlp(workdir / "M.onnx")
    assert_usage_error(
        cli(*command, "--allocator", "bogus"),
        "--allocator must be one of system, tuned, jemalloc, tcmalloc",
        "'bogus'",
    )


def _bench(cli, workdir, name, *options):
    out = cli(
        "bench",
        str(workdir / "mlp.onnx"),
        "-b",
        "selftest",
        "-O",
        "service_ms=0",
        *options,
        "--allocator",
        name,
        *FAST,
        "--json",
        f"{name}.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [record] = json.loads((workdir / f"{name}.json").read_text())
    return out.stdout, record


def test_a_paging_cell_is_flagged_and_the_tuned_allocator_cures_it(cli, workdir):
    """64 MiB filled and freed per iteration: glibc's defaults map it afresh each time."""
    benchmodels.mlp(workdir / "mlp.onnx")
    table, system = _bench(cli, workdir, "system", "-O", "touch_mib=64")
    m = system["metrics"]
    assert m["kernel_bound"] and m["kernel_share"] > 0.10, m["cpu_time"]
    assert m["minor_faults_per_iteration"] > 30  # 64 MiB: 32 huge pages or 16384 small
    assert "--allocator tuned" in m["kernel_hint"]
    assert system["context"]["allocator"] == {"name": "system", "variables": {}}
    assert "(kernel " in table and table.count("--allocator tuned") == 1  # one footnote

    table, tuned = _bench(cli, workdir, "tuned", "-O", "touch_mib=64")
    m = tuned["metrics"]
    assert not m["kernel_bound"] and m["kernel_share"] < 0.10, m["cpu_time"]
    assert m["minor_faults_per_iteration"] < 5 and m["kernel_hint"] is None
    assert tuned["context"]["allocator"] == {"name": "tuned", "variables": allocator.SETTINGS["tuned"]}
    assert "(kernel " not in table and "--allocator" not in table
    assert tuned["cell_key"] != system["cell_key"]  # another allocator, another cell


@pytest.mark.parametrize("name", ["jemalloc", "tcmalloc"])
def test_preloaded_allocators_are_recorded_and_keep_their_pages(cli, workdir, name):
    _need(name)
    benchmodels.mlp(workdir / "mlp.onnx")
    _, record = _bench(cli, workdir, name, "-O", "touch_mib=64")
    assert record["context"]["allocator"] == {
        "name": name,
        "variables": {**allocator.SETTINGS[name], "LD_PRELOAD": allocator.library(name)},
    }
    assert record["context"]["identity"]["allocator"] == name
    assert not record["metrics"]["kernel_bound"], record["metrics"]["cpu_time"]


def test_a_cell_that_computes_is_not_flagged(cli, workdir):
    benchmodels.mlp(workdir / "mlp.onnx")
    table, record = _bench(cli, workdir, "system", "-O", "service_ms=2")  # spins: user time
    m = record["metrics"]
    assert m["kernel_share"] is not None and m["kernel_share"] < 0.10 and not m["kernel_bound"]
    assert m["cpu_time"]["iterations"] == record["iterations"]
    assert "(kernel " not in table


def test_conversion_records_carry_the_default_allocator(cli, workdir):
    tiny_onnx.save(tiny_onnx.classifier(), workdir / "tiny.onnx")
    out = cli("build", "tiny.onnx", "--to", "fp16", "--json", "b.json")
    assert out.returncode == 0, out.stderr[-3000:]
    record = json.loads((workdir / "b.json").read_text())
    record = record[0] if isinstance(record, list) else record
    assert record["context"]["allocator"]["name"] == allocator.DEFAULT_ALLOCATOR
    assert record["context"]["thread_environment"]["OMP_NUM_THREADS"]


def test_training_records_its_allocator_and_kernel_share(cli, workdir):
    """The run happens in a cell, so this core test imports no framework itself."""
    out = cli(
        "train",
        "lenet5",
        "-f",
        "pytorch",
        "--batch-size",
        "8",
        "--warmup-steps",
        "1",
        "--steps",
        "3",
        "--threads",
        "1",
        "--allocator",
        "system",
        "--json",
        "t.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [r] = json.loads((workdir / "t.json").read_text())
    assert r["context"]["allocator"] == {"name": "system", "variables": {}}
    assert "allocator" not in r["context"]["identity"]  # older runs ran the system's too
    m = r["metrics"]
    assert m["minor_faults_per_iteration"] >= 0 and m["cpu_time"]["iterations"] == 3
    cpu = m["cpu_time"]["user_s"] + m["cpu_time"]["system_s"]
    # Three LeNet-5 steps may take less CPU than the tick-sampled split can resolve.
    if cpu < m["cpu_time"]["split_floor_s"]:
        assert m["kernel_share"] is None and not m["kernel_bound"], m["cpu_time"]
    else:
        assert 0 <= m["kernel_share"] <= 1 and m["kernel_bound"] == (m["kernel_share"] > 0.10)
