"""The cell launcher with real child processes that raise, crash, hang and allocate."""

from dlbench.harness.cells.launcher import run_cell


def test_ok_cell_returns_result_and_sees_environment():
    out = run_cell("selftest", {"value": 7}, env={"OMP_NUM_THREADS": "3", "PATH": "/usr/bin"})
    assert out.ok and out.result == {"echo": 7, "omp": "3"}


def test_exception_is_the_cells_failure_with_traceback():
    out = run_cell("selftest", {"action": "raise"})
    assert out.status == "failed"
    assert out.error == "RuntimeError: raised on purpose"
    assert "Traceback" in out.traceback


def test_native_crash_is_reported_with_signal():
    out = run_cell("selftest", {"action": "segfault"})
    assert out.status == "failed" and "SIGSEGV" in out.error


def test_exit_without_result():
    out = run_cell("selftest", {"action": "exit"})
    assert out.status == "failed" and "status 3" in out.error


def test_hang_is_killed_at_timeout():
    out = run_cell("selftest", {"action": "hang"}, timeout=2)
    assert out.status == "timeout" and "timed out after 2 s" in out.error
    assert 2 <= out.wall_s < 10


def test_peak_rss_is_measured():
    small = run_cell("selftest", {"action": "allocate", "mib": 10})
    big = run_cell("selftest", {"action": "allocate", "mib": 300})
    assert big.ok and small.ok
    assert big.peak_rss_mb >= 300
    assert big.peak_rss_mb - small.peak_rss_mb >= 250


def test_cells_sharing_a_process_keep_their_own_outcomes_and_a_crash_fails_only_the_rest():
    """--process engine's trade: a raise fails its cell alone and the process goes on;
    a crash fails the cell it happened in and every later one, the earlier keep theirs."""
    from dlbench.harness.cells.launcher import run_cells

    outs = run_cells(
        "selftest",
        [{"value": 1}, {"action": "raise"}, {"value": 3}, {"action": "segfault"}, {"value": 5}],
        timeout=30,
    )
    assert [o.status for o in outs] == ["ok", "failed", "ok", "failed", "failed"]
    assert outs[0].result["echo"] == 1 and outs[2].result["echo"] == 3
    assert "raised on purpose" in outs[1].error and outs[1].traceback
    assert "SIGSEGV" in outs[3].error
    assert outs[4].error.startswith("not run: the process it shared ended in an earlier cell")
    assert all(o.wall_s >= 0 for o in outs) and outs[0].peak_rss_mb


def test_a_hang_in_a_shared_process_times_out_that_cell_and_fails_the_rest():
    from dlbench.harness.cells.launcher import run_cells

    outs = run_cells("selftest", [{"value": 1}, {"action": "hang"}, {"value": 3}], timeout=1)
    assert [o.status for o in outs] == ["ok", "timeout", "failed"]
    assert "timed out after 3 s" in outs[1].error  # the process's: one second per cell


def test_a_cell_that_dies_without_a_word_is_reported_with_the_step_it_died_in_and_its_hint():
    """A segfault, an exit and a hang leave no reply: the step the cell named last (and what
    gets round it) is all a user has to go on."""
    step = ["compiling the model at 1x3x64x64", "-O reshape=off compiles it dynamic"]
    crashed = run_cell("selftest", {"action": "segfault", "stage": step})
    assert crashed.error == (
        "crashed with SIGSEGV (segmentation fault inside native code) while compiling the model "
        "at 1x3x64x64; -O reshape=off compiles it dynamic"
    )
    exited = run_cell("selftest", {"action": "exit", "stage": ["loading the model", None]})
    assert exited.error.startswith("exited with status 3 without a result while loading the model")
    hung = run_cell("selftest", {"action": "hang", "stage": ["warming up", None]}, timeout=2)
    assert hung.error == "timed out after 2 s (the cell was killed while warming up)"
    said = run_cell("selftest", {"action": "raise", "stage": step})
    assert said.error == "RuntimeError: raised on purpose"  # its own words are enough


def test_a_crash_in_a_shared_process_is_not_blamed_on_the_step_an_earlier_cell_ended_on():
    from dlbench.harness.cells.launcher import run_cells

    outs = run_cells(
        "selftest",
        [{"value": 1, "stage": ["an earlier cell's step", None]}, {"action": "segfault"}],
        timeout=30,
    )
    assert outs[0].ok
    assert outs[1].error == "crashed with SIGSEGV (segmentation fault inside native code)"
