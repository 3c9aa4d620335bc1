"""The old import path of ``dlbench bench``'s API, kept for callers written against it.

The work is split by job: ``bench.request`` (what is asked and its rules),
``bench.plan`` (the cells and their identities), ``bench.record`` (a cell's
record) and ``bench.execute`` (running the cells).  New code imports those.
"""

from __future__ import annotations

from dlbench.harness.bench.execute import run_bench
from dlbench.harness.bench.plan import Cell, identity, validate
from dlbench.harness.bench.record import make_record
from dlbench.harness.bench.request import BenchRequest, split

__all__ = ["BenchRequest", "Cell", "identity", "make_record", "run_bench", "split", "validate"]
