"""dlbench: train, convert and benchmark one network across frameworks and engines.

Importing this package must stay cheap: no deep-learning framework is imported
here or by any module the CLI loads at start-up.  Frameworks are imported only
inside the subprocess that runs a cell (see ``harness.cells.launcher``).
"""
