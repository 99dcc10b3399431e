"""Writes datasets with fulcrum-pack for fulcrum_pack_round_trip_test.cc, and beside each field
the bytes NumPy holds for it (FIELD.expected), which the trainer's reader must give back.

usage: write_with_fulcrum_pack.py OUT_DIR   (run with PYTHONPATH=<repo>/python)
Writes OUT_DIR/{torch,arrays,images,sharded}.
"""
import pathlib
import sys

import numpy as np
import torch
from PIL import Image

from fulcrum import pack


class TupleDataset(torch.utils.data.Dataset):
    """A torch Dataset of (uint8 image tensor, int label) tuples."""

    def __len__(self):
        return 37

    def __getitem__(self, index):
        image = torch.arange(3 * 5 * 4, dtype=torch.int64).view(3, 5, 4)
        return ((image * 7 + index) % 256).to(torch.uint8), index % 4


def write_expected(directory):
    """FIELD.expected for every field: the raw bytes of the whole field, as NumPy reads them."""
    for name, array in pack.load(directory).items():
        whole = np.concatenate(array.shards) if hasattr(array, "shards") else np.asarray(array)
        (pathlib.Path(directory) / f"{name}.expected").write_bytes(whole.tobytes())


def main(out):
    out = pathlib.Path(out)
    pack.write_dataset(out / "torch", TupleDataset(), field_names=["image", "label"],
                       classes={"label": 4})
    rng = np.random.default_rng(5)
    pack.write_arrays(out / "arrays", {
        "tokens": rng.integers(0, 1000, size=(23, 9), dtype=np.int32),
        "mask": rng.integers(0, 2, size=(23, 9), dtype=np.int8),
        "target": rng.standard_normal(size=(23, 2)).astype(np.float32),
        "half": rng.standard_normal(size=(23,)).astype(np.float16),
        "label": rng.integers(0, 3, size=(23,), dtype=np.int64),
    }, classes={"label": 3})
    source = out / "image-source"
    for label, colour in enumerate([(250, 10, 10), (10, 250, 10), (10, 10, 250)]):
        (source / f"class{label}").mkdir(parents=True)
        for i in range(4):
            size = (12 + i, 9 + 2 * i)
            Image.new("RGB", size, tuple(c - 3 * i for c in colour)).save(
                source / f"class{label}" / f"{i}.png")
    pack.pack_image_folder(source, out / "images", image_size=8)
    pack.write_dataset(out / "sharded", TupleDataset(), field_names=["image", "label"],
                       classes={"label": 4}, shard_size=10)
    for name in ["torch", "arrays", "images"]:
        write_expected(out / name)
    write_expected(out / "sharded")


if __name__ == "__main__":
    main(sys.argv[1])
