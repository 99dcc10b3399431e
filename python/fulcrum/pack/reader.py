"""Reading a packed dataset back without reading it into memory.

`load` checks the directory as the trainer does, then memory-maps every field. A sharded
dataset's fields come back as `ShardedArray`s: one array-like per field that indexes across
the shards lazily, so code reading `data["image"][i]` works the same on both layouts.
"""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Any, Union

import numpy as np

from .format import read_layout


class ShardedArray:
    """The shards of one field seen as a single array, concatenated in listed order, lazily.

    Supports len(), .shape, .dtype, .ndim, indexing the first axis with an int, a slice or an
    integer array (further axes as usual), and np.asarray (which reads everything). The
    per-shard memmaps are in `.shards`.
    """

    def __init__(self, shards: list[np.memmap]) -> None:
        self.shards = shards
        lengths = [len(s) for s in shards]
        self._starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self.dtype = shards[0].dtype
        self.shape = (int(self._starts[-1]),) + tuple(shards[0].shape[1:])
        self.ndim = len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"ShardedArray(shape={self.shape}, dtype={self.dtype}, shards={len(self.shards)})"

    def __getitem__(self, key: Any) -> Union[np.ndarray, Any]:
        rest: tuple = ()
        if isinstance(key, tuple):
            key, rest = (key[0], key[1:]) if key else (slice(None), ())
        n = len(self)
        if isinstance(key, (int, np.integer)):
            i = operator.index(key)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for {n} samples")
            i %= n
            s = int(np.searchsorted(self._starts, i, side="right")) - 1
            return self.shards[s][(i - int(self._starts[s]),) + rest]
        if isinstance(key, slice):
            idx = np.arange(*key.indices(n), dtype=np.int64)
        else:
            idx = np.asarray(key)
            if idx.dtype == bool:
                if idx.shape != (n,):
                    raise IndexError(f"a boolean index needs {n} entries, got {idx.shape}")
                idx = np.flatnonzero(idx)
            if idx.dtype.kind not in "iu" or idx.ndim != 1:
                raise IndexError("index the first axis with an int, a slice or a 1-D int array")
            if ((idx < -n) | (idx >= n)).any():
                raise IndexError(f"an index is out of bounds for {n} samples")
            idx = idx.astype(np.int64) % n
        out = np.empty((len(idx),) + self.shape[1:], dtype=self.dtype)
        which = np.searchsorted(self._starts, idx, side="right") - 1
        for s in np.unique(which):
            mask = which == s
            out[mask] = self.shards[s][idx[mask] - self._starts[s]]
        return out[(slice(None),) + rest] if rest else out

    def __array__(self, dtype: Any = None) -> np.ndarray:
        whole = np.concatenate([np.asarray(s) for s in self.shards])
        return whole if dtype is None else whole.astype(dtype)


def load(path: Union[str, Path]) -> dict[str, Union[np.memmap, ShardedArray]]:
    """Maps every field of a packed dataset, in dataset.json's order, reading nothing yet.

    An unsharded dataset gives {name: numpy.memmap} (read-only, shape [samples] + shape); a
    sharded one gives {name: ShardedArray} over each shard's memmaps. bfloat16 fields hold
    their raw bits as uint16: widen them with `bfloat16_to_float32`. Raises FormatError if the
    directory breaks the format (docs/dataset-format.md), naming the file.
    """
    layout = read_layout(Path(path))
    maps = {spec.name: [np.load(part.file(spec), mmap_mode="r") for part in layout.parts]
            for spec in layout.fields}
    if not layout.sharded:
        return {name: parts[0] for name, parts in maps.items()}
    return {name: ShardedArray(parts) for name, parts in maps.items()}
