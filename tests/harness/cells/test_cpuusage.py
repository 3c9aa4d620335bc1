"""Other processes' share of a cell's CPUs, read over its measured window
(``harness.cells.cpuusage``), with a real competing process.

Core group.  The suite's other worker may be busy on the same cores, so the
readings here are lower bounds, never "idle" claims.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from dlbench.harness.cells.cpuusage import SPLIT_FLOOR_S, CpuWindow
from dlbench.harness.output.tables import cpu_mark, cpu_note

SPIN = "import time\nt = time.perf_counter()\nwhile time.perf_counter() - t < 30: pass\n"


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux's /proc/stat")
def test_a_competing_process_on_our_cpus_is_seen_and_our_own_work_is_not():
    cpus = len(os.sched_getaffinity(0))
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])  # inherits our affinity
    try:
        time.sleep(0.3)  # let it start spinning
        window = CpuWindow()
        with window:
            time.sleep(1.0)  # this process: idle
        c = window.report(1)["contention"]
    finally:
        spinner.kill()
        spinner.wait()
    # One spinning process holds one of our CPUs: 1/cpus of their time (less ticks lost).
    # A sleep never ends early; on a loaded machine it may end late.
    assert c["cpus"] == cpus and 0.98 <= c["wall_s"] < 1.6, c
    assert c["others_share"] > 0.8 / cpus, c
    assert 0.0 <= c["steal_share"] <= 1.0
    own = CpuWindow()
    with own:  # our own spin is not "others"
        # Half a second of this process's own CPU time, however long a busy machine
        # takes to give it (a wall-clock spin got 0.33 s of CPU on a loaded CI machine).
        # (process_time is a system call: checked once per 100,000 user-mode additions.)
        t = time.process_time()
        while time.process_time() - t < 0.5:
            sum(range(100_000))
    r = own.report(1)
    assert r["cpu_time"]["user_s"] > 0.4
    # Our 0.5 s of CPU is not counted as others' (their share is what is left of the window).
    assert r["contention"]["others_s"] <= r["contention"]["wall_s"] * cpus - 0.4


def test_a_window_too_short_for_the_tick_sampled_split_claims_no_kernel_share():
    """CI read 0 s user, 4 ms system for three LeNet-5 steps: that is not a kernel-bound run."""
    window = CpuWindow()
    window.user_s, window.system_s = 0.0, 0.004
    r = window.report(3)
    assert r["kernel_share"] is None and not r["kernel_bound"] and r["kernel_hint"] is None
    window.user_s, window.system_s = 0.0, SPLIT_FLOOR_S
    r = window.report(3)
    assert r["kernel_share"] == 1.0 and r["kernel_bound"]


def test_a_contended_figure_is_marked_and_explained_once():
    contended = {"status": "ok", "metrics": {"contended_share": 0.35}}
    quiet = {"status": "ok", "metrics": {"contended_share": 0.02}}
    assert cpu_mark(contended) == " (others 35%)" and cpu_mark(quiet) == ""
    assert cpu_note([quiet]) is None
    note = cpu_note([contended, dict(contended), quiet])
    assert note.count("(others N%)") == 1 and "10%" in note


def test_no_contention_share_is_claimed_for_a_window_too_short_to_read():
    from dlbench.harness.cells.cpuusage import CONTENTION_FLOOR_S, CpuWindow

    with CpuWindow() as window:
        pass  # well under the floor: /proc/stat's 10 ms ticks cannot resolve it
    assert window.wall_s < CONTENTION_FLOOR_S
    r = window.report(1)
    assert r["contention"] is None and r["contended_share"] is None
