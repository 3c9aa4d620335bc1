"""One test, every framework: the parameters that put each case in its framework's group.

tests/suites.py runs each framework's tests in a pytest process of its own (TensorFlow and
MindSpore cannot share one), selected by marker.  A test parametrized with ``frameworks()``
is one test in the source and, in each group, the cases of that group's framework; the
framework itself is imported inside the test, never at a module's top, because every group
collects the module.
"""

from __future__ import annotations

import pytest

from dlbench.core.frameworks import NAMES

FRAMEWORKS = NAMES  # each is a pytest marker and a group of its own


def frameworks(*names: str) -> list:
    """``pytest.param`` per framework (all three by default), each carrying its marker."""
    chosen = names or FRAMEWORKS
    unknown = [n for n in chosen if n not in FRAMEWORKS]
    if unknown:
        raise ValueError(f"not a framework group: {', '.join(unknown)}")
    return [pytest.param(n, marks=getattr(pytest.mark, n), id=n) for n in chosen]


def run_in_each(script, *rest: str) -> None:
    """``python SCRIPT FRAMEWORK REST...`` for every framework, side by side (start-up,
    not compute, dominates; tests/utils/peers.py is where they wait for each other);
    fails with each failed child's output."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, GLOG_v="3", TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    procs = {
        fw: subprocess.Popen(
            [sys.executable, str(script), fw, *rest],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for fw in FRAMEWORKS
    }
    failed = []
    for fw, proc in procs.items():
        out, _ = proc.communicate(timeout=600)
        if proc.returncode != 0:
            failed.append(f"{fw} exited {proc.returncode}:\n{out[-3000:]}")
    assert not failed, "\n".join(failed)
