"""--shard-size splits a dataset into shard-NNNNN directories, each a complete dataset, listed
by the top-level dataset.json; load() concatenates them lazily in listed order."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from conftest import numpy_read_back
from fulcrum.pack import ShardedArray, load, read_layout, write_arrays, write_dataset


@pytest.fixture
def sharded(tmp_path):
    x = np.arange(10 * 3, dtype=np.float32).reshape(10, 3)
    y = np.arange(10) % 4
    write_arrays(tmp_path / "out", {"x": x, "y": y}, classes={"y": 4}, shard_size=4)
    return tmp_path / "out", x, y


def test_top_level_lists_shards_of_shard_size(sharded):
    out, x, y = sharded
    assert json.loads((out / "dataset.json").read_text()) == {
        "format": "fulcrum.dataset", "version": 1,
        "shards": ["shard-00000", "shard-00001", "shard-00002"]}
    counts = [json.loads((out / s / "dataset.json").read_text())["samples"]
              for s in ("shard-00000", "shard-00001", "shard-00002")]
    assert counts == [4, 4, 2]
    np.testing.assert_array_equal(np.load(out / "shard-00001" / "x.npy", mmap_mode="r"), x[4:8])
    layout = read_layout(out)
    assert layout.sharded and layout.samples == 10
    assert [f.classes for f in layout.fields] == [None, 4]


def test_sharded_array_indexes_across_shards(sharded):
    out, x, y = sharded
    data = load(out)
    assert isinstance(data["x"], ShardedArray)
    assert data["x"].shape == (10, 3) and len(data["y"]) == 10 and data["x"].dtype == np.float32
    np.testing.assert_array_equal(np.asarray(data["x"]), x)
    np.testing.assert_array_equal(numpy_read_back(out)["y"], y)
    for key in (0, 3, 4, 9, -1, -10, slice(None), slice(2, 9), slice(1, None, 3),
                slice(None, None, -1), [9, 0, 5, 4], np.array([3, 4]), x[:, 0] > 10):
        np.testing.assert_array_equal(data["x"][key], x[key], err_msg=str(key))
    np.testing.assert_array_equal(data["x"][5, 1:], x[5, 1:])
    np.testing.assert_array_equal(data["x"][3:6, 2], x[3:6, 2])
    with pytest.raises(IndexError):
        data["x"][10]


def test_torch_dataset_shards_with_exact_multiple(tmp_path):
    data = [(torch.tensor([i, -i], dtype=torch.int32), i % 2) for i in range(6)]
    write_dataset(tmp_path / "out", data, shard_size=3)
    assert [p.samples for p in read_layout(tmp_path / "out").parts] == [3, 3]
    np.testing.assert_array_equal(load(tmp_path / "out")["label"][:], [0, 1, 0, 1, 0, 1])


def test_shard_size_larger_than_dataset_gives_one_shard(tmp_path):
    write_arrays(tmp_path / "out", {"x": np.arange(3)}, shard_size=100)
    assert json.loads((tmp_path / "out" / "dataset.json").read_text())["shards"] == ["shard-00000"]
