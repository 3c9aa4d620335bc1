"""The plainest TensorFlow/Keras training loop, to measure the harness' overhead.

Deliberately no harness code: the textbook custom loop from the TensorFlow
guide (GradientTape in a ``tf.function``, Keras SGD), the same model, data,
seed and thread settings as ``harness.training.tensorflow``.  If the harness'
throughput falls clearly below this script's, the harness costs time.

    python benchmarks/plain_train_tensorflow.py --model resnet50 --batch-size 16 \
        --steps 3 --warmup-steps 2 --threads 2
"""

from __future__ import annotations

import argparse
import json
import time

LEARNING_RATE = 0.05  # the harness' TrainConfig defaults
MOMENTUM = 0.9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (inter-op: 1)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.steps < 1 or args.warmup_steps < 0:
        parser.error("--steps must be >= 1 and --warmup-steps >= 0")

    import tensorflow as tf

    # Thread pools are fixed when TF's runtime starts: set them before any op.
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras

    from dlbench.models import synthetic
    from dlbench.models.registry import get_model

    spec = get_model(args.model)
    n = synthetic.pool_size(spec, args.batch_size, args.warmup_steps + args.steps)
    batches = synthetic.image_batches(spec, args.batch_size, n, seed=args.seed, layout="NHWC")

    keras.utils.set_random_seed(args.seed)
    model = spec.build("tensorflow")
    optimizer = keras.optimizers.SGD(learning_rate=LEARNING_RATE, momentum=MOMENTUM)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    data = [(tf.constant(x), tf.constant(y)) for x, y in batches]

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_weights)
        optimizer.apply(grads, model.trainable_weights)
        return loss

    for i in range(args.warmup_steps):
        float(train_step(*data[i % n]))
    start = time.perf_counter()
    for i in range(args.warmup_steps, args.warmup_steps + args.steps):
        loss = train_step(*data[i % n])
    float(loss)  # wait for the last step
    window = time.perf_counter() - start
    print(
        json.dumps(
            {"throughput_sps": args.steps * args.batch_size / window, "window_s": window, "steps": args.steps}
        )
    )


if __name__ == "__main__":
    main()
