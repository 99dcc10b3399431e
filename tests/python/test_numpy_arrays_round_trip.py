"""write_arrays packs whole arrays (even memory-mapped ones, in blocks) and they read back
identical; every dtype of the format's table gets its documented descr."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import numpy_read_back
from fulcrum.pack import DTYPES, load, read_layout, write_arrays
from fulcrum.pack import sources


def test_arrays_read_back_identical(tmp_path):
    rng = np.random.default_rng(1)
    arrays = {
        "image": rng.integers(0, 256, (20, 3, 8, 8), dtype=np.uint8),
        "feature": rng.standard_normal((20, 7)).astype(np.float32),
        "label": rng.integers(0, 5, 20),
    }
    write_arrays(tmp_path / "out", arrays, classes={"label": 5}, meta={"note": "test"})
    for read in (numpy_read_back(tmp_path / "out"), load(tmp_path / "out")):
        for name, want in arrays.items():
            assert read[name].dtype == want.dtype
            np.testing.assert_array_equal(read[name], want)
    layout = read_layout(tmp_path / "out")
    assert layout.meta == {"note": "test"}
    assert [f.classes for f in layout.fields] == [None, None, 5]


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != "bfloat16"])
def test_each_dtype_is_stored_with_its_descr(tmp_path, dtype):
    array = (np.arange(12) % 100).astype(dtype).reshape(4, 3)
    write_arrays(tmp_path / "out", {"x": array})
    with open(tmp_path / "out" / "x.npy", "rb") as f:
        np.lib.format.read_magic(f)
        shape, fortran, descr = np.lib.format.read_array_header_1_0(f)
    assert (shape, fortran, descr.str) == ((4, 3), False, DTYPES[dtype])
    np.testing.assert_array_equal(load(tmp_path / "out")["x"], array)


def test_big_endian_and_fortran_inputs_are_stored_little_endian_c_order(tmp_path):
    big = np.arange(6, dtype=">i4")
    fortran = np.asfortranarray(np.arange(24, dtype=np.float32).reshape(6, 4))
    write_arrays(tmp_path / "out", {"big": big, "f": fortran})
    data = numpy_read_back(tmp_path / "out")
    assert data["big"].dtype.str == "<i4"
    np.testing.assert_array_equal(data["big"], big)
    np.testing.assert_array_equal(data["f"], fortran)
    read_layout(tmp_path / "out")


def test_memmapped_input_is_copied_in_blocks(tmp_path, monkeypatch):
    source = tmp_path / "big.npy"
    mm = np.lib.format.open_memmap(source, mode="w+", dtype=np.int16, shape=(1000, 16))
    mm[:] = np.arange(16000, dtype=np.int16).reshape(1000, 16)
    mm.flush()
    monkeypatch.setattr(sources, "BLOCK_BYTES", 32 * 100)  # 100 rows a block
    calls = []
    write_arrays(tmp_path / "out", {"x": np.load(source, mmap_mode="r")},
                 progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (100, 1000) and calls[-1] == (1000, 1000) and len(calls) == 10
    np.testing.assert_array_equal(load(tmp_path / "out")["x"], mm)
