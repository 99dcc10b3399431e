"""What the data-path benchmarks in this folder share: a free loopback port, and a packed dataset
of random uint8 images [3, S, S] with int64 labels of 10 classes, written with the repository's
own fulcrum.pack (python/), streamed through a memory map so large ones need not fit in memory.
"""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "lib"))
from free_port import free_port  # noqa: E402 (below the ephemeral range)


def write_random_images(directory, samples, size, seed):
    """Writes the dataset into `directory` unless a complete one (its dataset.json) is there."""
    if os.path.exists(os.path.join(directory, "dataset.json")):
        return
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from fulcrum import pack  # noqa: E402  (the repository's own package, not installed)
    rng = np.random.default_rng(seed)
    source = directory + "-source.npy"
    images = np.lib.format.open_memmap(source, mode="w+", dtype=np.uint8,
                                       shape=(samples, 3, size, size))
    for start in range(0, samples, 1024):
        end = min(samples, start + 1024)
        images[start:end] = rng.integers(0, 256, size=(end - start, 3, size, size),
                                         dtype=np.uint8)
    labels = rng.integers(0, 10, size=samples, dtype=np.int64)
    pack.write_arrays(directory, {"image": images, "label": labels}, classes={"label": 10})
    del images
    os.remove(source)
