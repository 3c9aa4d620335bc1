"""Hand-written TensorFlow inference loop: the yardstick for ``dlbench bench -b tensorflow``.

It shares only the zoo's model builder with the harness: the Keras network
built with the seed on /CPU:0, thread pools set before any op runs, a
``tf.function`` around ``model(x, training=False)``, one batch of
standard-normal float32 inputs (made NCHW with the same generator call and
seed, transposed to NHWC and placed on the device before timing), the first
run and a warm-up, then ``--iterations`` timed calls.  Throughput is samples
over the window's wall time.  Prints one JSON line.  The allocator is whatever
the environment says (benchmarks/allocator_table.py gives it the cell's).

    python benchmarks/plain_bench_tensorflow.py --model resnet50 --batch-size 32 --threads 2
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(argv=None) -> None:
    from plain_loop import parser, timed

    p = parser(__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet50")
    a = p.parse_args(argv)

    import numpy as np
    import tensorflow as tf

    from dlbench.models.registry import get_model

    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(a.inter_op_threads)
    spec = get_model(a.model)
    with tf.device("/CPU:0"):
        model = spec.build("tensorflow", seed=a.seed)
        x = np.random.default_rng(a.seed).standard_normal(
            (a.batch_size, *spec.inputs[0].shape), dtype=np.float32
        )
        x = tf.identity(tf.constant(np.ascontiguousarray(x.transpose(0, 2, 3, 1))))

    @tf.function
    def forward(x):
        with tf.device("/CPU:0"):
            return model(x, training=False)

    result = timed(lambda: forward(x), a.batch_size, a.warmup, a.iterations)
    print(json.dumps({**result, "tensorflow": tf.__version__}))


if __name__ == "__main__":
    main()
