"""``dlbench bench``: measure inference on every backend, in sweeps of isolated cells.

Axes kept apart (optimum-benchmark's idea): backends (``harness.backends``),
scenarios (``harness.bench.scenarios``), the cell launcher
(``harness.cells.launcher``); ``execute.run_bench`` composes them (request ->
plan -> cells -> record), ``child.run``
is what one cell's process does, ``measure`` owns the clock.
"""
