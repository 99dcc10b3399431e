"""A torch Dataset of tuples or dicts packs into fields that read back identical, through
plain numpy.load and through fulcrum.pack.load, with the dtypes the brief promises."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset

from conftest import numpy_read_back
from fulcrum.pack import load, read_layout, write_dataset


class Pairs(Dataset):
    """(float32 image [3, 4, 5], Python int label): the classic classification sample."""

    def __init__(self, n: int = 13) -> None:
        g = torch.Generator().manual_seed(0)
        self.images = torch.randn(n, 3, 4, 5, generator=g)
        self.labels = [i % 4 for i in range(n)]

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.images[i], self.labels[i]


class Records(Dataset):
    """Dicts mixing tensor dtypes and Python scalars."""

    def __init__(self, n: int = 9) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return {
            "tokens": torch.arange(i, i + 6, dtype=torch.int32),
            "mask": torch.tensor([1, 1, 0, 1, 0, 0], dtype=torch.uint8),
            "target": torch.tensor(i / 7, dtype=torch.float16),
            "weight": 0.5 * i,
            "label": i % 3,
        }


def expect_identical(out, expected: dict[str, np.ndarray]) -> None:
    for read in (numpy_read_back(out), {k: np.asarray(v) for k, v in load(out).items()}):
        assert list(read) == list(expected)
        for name, want in expected.items():
            assert read[name].dtype == want.dtype, name
            np.testing.assert_array_equal(read[name], want, err_msg=name)


def test_tuples_pack_as_input_and_label(tmp_path):
    ds = Pairs()
    write_dataset(tmp_path / "out", ds, classes={"label": 4})
    expect_identical(tmp_path / "out", {
        "input": ds.images.numpy(),
        "label": np.array(ds.labels, dtype=np.int64),
    })
    header = json.loads((tmp_path / "out" / "dataset.json").read_text())
    assert header["samples"] == 13
    assert header["fields"] == [
        {"name": "input", "dtype": "float32", "shape": [3, 4, 5], "file": "input.npy"},
        {"name": "label", "dtype": "int64", "shape": [], "file": "label.npy", "classes": 4},
    ]
    read_layout(tmp_path / "out")  # every check the format makes passes


def test_tuples_take_given_field_names(tmp_path):
    class Triples(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return torch.full((2,), i, dtype=torch.int16), np.int8(-i), float(i)

    write_dataset(tmp_path / "out", Triples(), field_names=["a", "b", "c"])
    expect_identical(tmp_path / "out", {
        "a": np.repeat(np.arange(5, dtype=np.int16), 2).reshape(5, 2),
        "b": -np.arange(5, dtype=np.int8),
        "c": np.arange(5, dtype=np.float32),
    })


def test_dicts_keep_keys_dtypes_and_order(tmp_path):
    ds = Records()
    write_dataset(tmp_path / "out", ds, classes={"label": 3})
    samples = [ds[i] for i in range(len(ds))]
    expect_identical(tmp_path / "out", {
        "tokens": np.stack([s["tokens"].numpy() for s in samples]),
        "mask": np.stack([s["mask"].numpy() for s in samples]),
        "target": np.stack([s["target"].numpy() for s in samples]),
        "weight": np.array([s["weight"] for s in samples], dtype=np.float32),
        "label": np.array([s["label"] for s in samples], dtype=np.int64),
    })
    dtypes = {f.name: f.dtype for f in read_layout(tmp_path / "out").fields}
    assert dtypes == {"tokens": "int32", "mask": "uint8", "target": "float16",
                      "weight": "float32", "label": "int64"}


def test_dict_field_names_pick_and_order_keys(tmp_path):
    write_dataset(tmp_path / "out", Records(), field_names=["label", "tokens"])
    assert list(load(tmp_path / "out")) == ["label", "tokens"]


def test_single_tensor_samples_are_named_input(tmp_path):
    data = [torch.tensor([i, i + 1]) for i in range(4)]
    write_dataset(tmp_path / "out", data)
    expect_identical(tmp_path / "out", {"input": np.array([[i, i + 1] for i in range(4)])})


def test_load_returns_read_only_memmaps(tmp_path):
    write_dataset(tmp_path / "out", Pairs())
    data = load(tmp_path / "out")
    assert all(isinstance(v, np.memmap) for v in data.values())
    with pytest.raises(ValueError):
        data["label"][0] = 1
