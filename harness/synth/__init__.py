"""``dlbench synth``: one small generated network that stands for a set of applications.

Benchmarking a dozen applications on every configuration is what a hardware or
settings question needs, and what nobody runs.  The synthetic benchmark (AI Matrix's
"StatsNet" idea) profiles the applications once (``workload``: each node's op, shapes and
time on dissimilar reference configurations, an INT8 build among them), groups each op's
real shapes with k-medoids so every representative is a layer some application really
runs (``fit``), and chains those representatives, each with fresh weights and buffers,
repeated as often as non-negative least squares says their measured costs need to
reproduce the applications' time shares on every reference (``generate``).  The result
is an ONNX file like any other (bench, build, compare and report take it), with its
PyTorch and Keras versions for the native backends.  ``validate`` then says, across a
matrix of configurations, how well the one network's speed ratios predict the
applications' weighted geometric mean, beside the baselines it must beat.  Its score is
derived, in MLPerf's sense, and says so.
"""

# How much a reference's speed-ratio miss (|log|) counts beside the worst class-share
# divergence, in the fit and in the choice of the network kept (``counts.judged``,
# ``--ratio-weight``).  Here, light, for the flag's default as for the fit.
RATIO_WEIGHT = 1.0


class ProfileFailed(RuntimeError):
    """A profile, timing, export or training cell failed (a crash, a timeout): the step
    fails, with its reason.  Here, below every step's module, so that each can raise it."""
