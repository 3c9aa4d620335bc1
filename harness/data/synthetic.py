"""Synthetic data (``models.synthetic``) behind the reader interface.

The only preloaded "reader": its training pool is generated and placed on the
device before the clock and cycled, so its data time is zero by construction.
The held-out split is a fresh seeded one from the same class patterns: the
same generator run further than the training pool, so its samples are new
draws of noise and labels that training never saw.
"""

from __future__ import annotations

from collections.abc import Iterator

from dlbench.harness.data.base import Batch, Dataset
from dlbench.models import synthetic
from dlbench.models.registry import ModelSpec

EVAL_SAMPLES = 256  # default size of the held-out split


class Synthetic(Dataset):
    format = "synthetic"
    preloaded = True

    def __init__(self, spec: ModelSpec, path=None):
        super().__init__(spec, None)
        self.eval_split = "synthetic-heldout"
        self.pool_batches = 0

    def describe_source(self) -> str:
        return "--data synthetic"

    def split_sizes(self) -> dict[str, int]:
        return {"train": self.pool_batches * self.batch_size} if self.pool_batches else {}

    def _generate(self, batch_size: int, n: int, seed: int, layout: str) -> list[Batch]:
        # Images, token ids or BERT pre-training pairs, by the spec (models.synthetic).
        return synthetic.batches(self.spec, batch_size, n, seed=seed, layout=layout)

    def pool(self, batch_size: int, wanted: int, seed: int, layout: str) -> list[Batch]:
        """The distinct batches training cycles through (``synthetic.pool_size``)."""
        self.batch_size, self.seed = batch_size, seed
        self.pool_batches = synthetic.pool_size(self.spec, batch_size, wanted)
        return self._generate(batch_size, self.pool_batches, seed, layout)

    def train_batches(self, batch_size: int, seed: int, layout: str) -> Iterator[Batch]:
        batches = self.pool(batch_size, 8, seed, layout)
        while True:
            yield from batches

    def eval_batches(self, batch_size: int, layout: str, limit: int | None = None) -> Iterator[Batch]:
        # Skip the training pool's batches (all of the largest pool when none was drawn
        # at this batch size): the held-out samples come after them in the stream.
        same = self.pool_batches and self.batch_size == batch_size
        skip = self.pool_batches if same else synthetic.MAX_POOL_BATCHES
        seed = getattr(self, "seed", 0)
        n = -(-(limit or EVAL_SAMPLES) // batch_size)
        # Regenerating the pool's batches costs a little time but keeps models.synthetic as is.
        batches = self._generate(batch_size, skip + n, seed, layout)[skip:]
        remaining = n * batch_size if limit is None else limit
        for x, y in batches:
            take = min(batch_size, remaining)
            remaining -= take
            # Token models' inputs (and BERT's labels) are tuples of arrays (models.synthetic).
            yield (x, y) if take == batch_size else (_head(x, take), _head(y, take))
            if remaining <= 0:
                break


def _head(a, n: int):
    """The first ``n`` samples of an array, or of each array in a tuple."""
    return tuple(_head(v, n) for v in a) if isinstance(a, tuple) else a[:n]
