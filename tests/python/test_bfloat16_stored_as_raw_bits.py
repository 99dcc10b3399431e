"""torch.bfloat16 tensors are stored as their raw 16 bits, descr '<u2', dtype "bfloat16" in
dataset.json; bfloat16_to_float32 widens them back exactly."""

from __future__ import annotations

import json

import numpy as np
import torch

from conftest import numpy_read_back
from fulcrum.pack import bfloat16_to_float32, load, read_layout, write_arrays, write_dataset


def test_bfloat16_bits_round_trip(tmp_path):
    values = torch.tensor([[1.0, -2.5, float("inf")], [0.0, -0.0, float("nan")],
                           [3.140625, 1e-38, -65280.0]], dtype=torch.bfloat16)
    data = [{"w": values[i], "k": i} for i in range(3)]
    write_dataset(tmp_path / "out", data)
    header = json.loads((tmp_path / "out" / "dataset.json").read_text())
    assert header["fields"][0] == {"name": "w", "dtype": "bfloat16", "shape": [3],
                                   "file": "w.npy"}
    with open(tmp_path / "out" / "w.npy", "rb") as f:
        np.lib.format.read_magic(f)
        assert np.lib.format.read_array_header_1_0(f)[2].str == "<u2"
    bits = values.view(torch.int16).numpy().view(np.uint16)
    assert bits[0, 0] == 0x3F80 and bits[0, 1] == 0xC020 and bits[0, 2] == 0x7F80
    for read in (numpy_read_back(tmp_path / "out"), load(tmp_path / "out")):
        np.testing.assert_array_equal(read["w"], bits)
    np.testing.assert_array_equal(bfloat16_to_float32(load(tmp_path / "out")["w"]),
                                  values.float().numpy())
    read_layout(tmp_path / "out")


def test_bfloat16_tensor_in_write_arrays(tmp_path):
    t = torch.linspace(-1, 1, 8, dtype=torch.bfloat16).reshape(4, 2)
    write_arrays(tmp_path / "out", {"t": t})
    assert read_layout(tmp_path / "out").fields[0].dtype == "bfloat16"
    np.testing.assert_array_equal(bfloat16_to_float32(load(tmp_path / "out")["t"]),
                                  t.float().numpy())
