"""``dlbench micro``: GEMM, convolution and memory-stream cells on every engine.

A micro cell runs one operation in one engine in its own process, like every
other cell (``harness.cells.launcher``), times it with the bench loop
(``bench.measure``: warm-up excluded and reported, raw samples kept), checks
its result against numpy, and stores a ``micro`` record that ``report`` and
``compare`` read like any other.
"""
