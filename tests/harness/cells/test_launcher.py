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
