"""load() and --inspect check a directory as the format requires and refuse a broken one,
naming the file: unknown keys, a wrong descr, Fortran order, a truncated or padded file, a
bad name or file, shards that disagree."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fulcrum.pack import FormatError, load, write_arrays


@pytest.fixture
def packed(tmp_path):
    write_arrays(tmp_path / "d", {"x": np.arange(12, dtype=np.float32).reshape(4, 3),
                                  "y": np.arange(4)}, classes={"y": 4})
    return tmp_path / "d"


def edit_header(directory, change):
    path = directory / "dataset.json"
    obj = json.loads(path.read_text())
    change(obj)
    path.write_text(json.dumps(obj))


@pytest.mark.parametrize("change,words", [
    (lambda o: o.update(extra=1), "unknown key(s) ['extra']"),
    (lambda o: o["fields"][0].update(clases=3), "fields[0]: unknown key(s) ['clases']"),
    (lambda o: o.update(version=2), "'version' must be 1"),
    (lambda o: o.update(version=True), "'version' must be 1"),
    (lambda o: o.update(samples=0), "'samples' must be an integer >= 1"),
    (lambda o: o.update(fields=[]), "'fields' must be a non-empty list"),
    (lambda o: o["fields"][0].update(name="1x"), "field name '1x' is not allowed"),
    (lambda o: o["fields"][0].update(file="../x.npy"), "must be a plain file name"),
    (lambda o: o["fields"][0].update(dtype="float64"), "dtype 'float64' is not one of"),
    (lambda o: o["fields"][0].update(classes=3), "classes is for integer fields"),
    (lambda o: o["fields"][1].update(name="x"), "field names must be unique"),
    (lambda o: o.update(samples=5), "x.npy: shape [4, 3], but dataset.json says [5, 3]"),
])
def test_bad_header_is_refused(packed, change, words):
    edit_header(packed, change)
    with pytest.raises(FormatError) as info:
        load(packed)
    assert words in str(info.value)
    assert "dataset.json" in str(info.value) or ".npy" in str(info.value)


def test_truncated_and_padded_files_are_refused_by_name(packed):
    path = packed / "x.npy"
    data = path.read_bytes()
    path.write_bytes(data + b"\0" * 4)
    with pytest.raises(FormatError, match=r"x\.npy: .* \(padded\)"):
        load(packed)
    path.write_bytes(data[:-4])
    with pytest.raises(FormatError, match=r"x\.npy: .* \(truncated\)"):
        load(packed)


def test_wrong_descr_and_fortran_order_are_refused(packed):
    np.save(packed / "x.npy", np.zeros((4, 3), dtype=">f4"))
    with pytest.raises(FormatError, match=r"descr is '>f4', but field 'x' is float32"):
        load(packed)
    np.save(packed / "x.npy", np.asfortranarray(np.zeros((4, 3), dtype="<f4")))
    with pytest.raises(FormatError, match="fortran_order must be False"):
        load(packed)


def test_npy_versions_2_and_3_are_accepted(packed):
    array = np.arange(12, dtype=np.float32).reshape(4, 3)
    for version in ((2, 0), (3, 0)):
        with open(packed / "x.npy", "wb") as f:
            np.lib.format.write_array(f, array, version=version)
        np.testing.assert_array_equal(load(packed)["x"], array)


def test_shards_that_disagree_are_refused(tmp_path):
    write_arrays(tmp_path / "d", {"x": np.arange(4, dtype=np.int32)}, shard_size=2)
    edit_header(tmp_path / "d" / "shard-00001",
                lambda o: o["fields"][0].update(classes=9))
    with pytest.raises(FormatError, match="shard-00001/dataset.json: its fields differ"):
        load(tmp_path / "d")


def test_nested_shards_and_bad_shard_names_are_refused(tmp_path):
    write_arrays(tmp_path / "d", {"x": np.arange(4, dtype=np.int32)}, shard_size=2)
    edit_header(tmp_path / "d", lambda o: o.update(shards=["../d"]))
    with pytest.raises(FormatError, match="must be a plain file name"):
        load(tmp_path / "d")
    edit_header(tmp_path / "d", lambda o: o.update(shards=["shard-00000"]))
    edit_header(tmp_path / "d" / "shard-00000", lambda o: o.update(shards=["x"]))
    with pytest.raises(FormatError, match="a shard cannot itself list shards"):
        load(tmp_path / "d")
