"""Which samples each rank trains on: the same rules, numbers and permutation as fulcrum-trainer
(trainer_image/trainer/data/sample_order.cc), so the two runtimes split a dataset identically.

The job walks one global stream of sample positions; position p belongs to epoch p // N and is
sample epoch_order(p // N)[p % N]. A step that starts at `cursor` under the plan `batches`
consumes positions [cursor, cursor + sum(batches)), cut by prefix sums: rank r takes
[cursor + b_0 + ... + b_{r-1}, ... + b_r). So every sample of an epoch is used exactly once,
whatever the plan or the membership did in between.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_SEED_MULTIPLIER = 0x2545F4914F6CDD1D


def split_mix64(state: int) -> tuple[int, int]:
    """One SplitMix64 draw: (the new state, the output). Portable and well mixed."""
    state = (state + _GOLDEN) & _MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return state, z ^ (z >> 31)


def _split_mix64_stream(state: int, count: int) -> np.ndarray:
    """The next `count` SplitMix64 outputs from `state`, vectorised (uint64 arithmetic wraps)."""
    steps = np.arange(1, count + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(state) + steps * np.uint64(_GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def shard_for_rank(cursor: int, batches: Sequence[int], rank: int) -> range:
    """The positions `rank` trains on in the step that starts at `cursor` under `batches`."""
    if not 0 <= rank < len(batches):
        raise ValueError(f"rank is {rank} but the plan has {len(batches)} ranks")
    if cursor < 0:
        raise ValueError(f"cursor must be >= 0, got {cursor}")
    if any(batch < 0 for batch in batches):
        raise ValueError(f"batches must be >= 0, got {list(batches)}")
    begin = cursor + sum(batches[:rank])
    return range(begin, begin + batches[rank])


class SampleOrder:
    """Deterministic per-epoch permutation of range(N) (Fisher-Yates driven by SplitMix64), the
    same on every rank, platform and runtime. shuffle=False keeps the identity order."""

    def __init__(self, dataset_size: int, seed: int = 0, shuffle: bool = True):
        if dataset_size <= 0:
            raise ValueError(
                f"the dataset is empty (dataset_size={dataset_size}): nothing to train")
        self.dataset_size = dataset_size
        self.seed = seed
        self.shuffle = shuffle
        # The two epochs asked for last: one step may straddle an epoch boundary.
        self._cached: dict[int, np.ndarray] = {}

    def epoch_order(self, epoch: int) -> np.ndarray:
        order = self._cached.get(epoch)
        if order is not None:
            return order
        n = self.dataset_size
        if not self.shuffle:
            order = np.arange(n, dtype=np.int64)
        else:
            state = (self.seed * _SEED_MULTIPLIER + epoch) & _MASK
            draws = _split_mix64_stream(state, max(n - 1, 0))
            # The k-th draw picks the partner of position i = n - k among [0, i).
            bounds = np.arange(n, 1, -1, dtype=np.uint64)
            partners = (draws % bounds).tolist()
            values = list(range(n))
            for i, j in zip(range(n - 1, 0, -1), partners):
                values[i], values[j] = values[j], values[i]
            order = np.asarray(values, dtype=np.int64)
        if len(self._cached) >= 2:
            self._cached.pop(next(iter(self._cached)))
        self._cached[epoch] = order
        return order

    def indices(self, positions: range) -> list[int]:
        """Sample indices for the positions, crossing epochs as needed."""
        result: list[int] = []
        position = positions.start
        while position < positions.stop:
            epoch, offset = divmod(position, self.dataset_size)
            take = min(positions.stop - position, self.dataset_size - offset)
            result.extend(self.epoch_order(epoch)[offset:offset + take].tolist())
            position += take
        return result
