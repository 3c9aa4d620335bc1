"""Default thread counts follow the CPUs a run may use (taskset, a container's cpuset)."""

import json
import os
import subprocess
import sys

import pytest

from dlbench.harness.cells import threads

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform"
)


def _confined(code: str, cpus: set[int]) -> str:
    """Run ``code`` in a child confined to ``cpus`` (as taskset would)."""
    wrapper = f"import os; os.sched_setaffinity(0, {sorted(cpus)!r}); {code}"
    out = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_one_allowed_cpu_gives_one_default_thread_and_is_recorded():
    one = {min(os.sched_getaffinity(0))}
    got = json.loads(
        _confined(
            "import json; from dlbench.harness.cells import threads, cellenv; "
            "print(json.dumps([threads.usable_cores(), threads.ThreadConfig.default().intra_op, "
            "cellenv.context(dict(os.environ)).get('cpu_affinity'), threads.physical_cores()]))",
            one,
        )
    )
    assert got[:3] == [1, 1, sorted(one)]
    assert got[3] == threads.physical_cores()  # the machine's figure is unchanged


def test_all_cpus_allowed_records_no_affinity():
    """(In a child given every CPU: a pytest-xdist worker is itself confined.)"""
    got = json.loads(
        _confined(
            "import json; from dlbench.harness.cells import threads; print(json.dumps("
            "[threads.affinity_in_force(), threads.usable_cores(), threads.physical_cores()]))",
            set(range(os.cpu_count())),
        )
    )
    assert got[0] is None and got[1] == got[2]


def test_env_says_when_the_process_is_confined(cli):
    one = {min(os.sched_getaffinity(0))}
    line = _confined(
        "import sys; from dlbench.harness.cli import main; sys.argv = ['dlbench', 'env']; main()", one
    )
    assert f"confined to     CPUs {min(one)}: 1 physical core(s)" in line
