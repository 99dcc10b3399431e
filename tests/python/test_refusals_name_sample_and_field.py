"""Inconsistent samples are refused with the sample index and the field named, the CLI exits
2 with that message, and a refused or crashed pack never leaves a dataset.json behind."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fulcrum.pack import PackError, SampleError, load, write_arrays, write_dataset


def pairs(n=8, **changes):
    """(float32 [2, 3], int label) samples; changes[i] replaces sample i."""
    return [changes.get(f"s{i}", (torch.zeros(2, 3), i % 3)) for i in range(n)]


@pytest.mark.parametrize("data,index,field,words", [
    (pairs(s3=(torch.zeros(2, 4), 0)), 3, "input", "shape [2, 4], but sample 0's is [2, 3]"),
    (pairs(s2=(torch.zeros(2, 3), 1.5)), 2, "label", "dtype float32, but sample 0's is int64"),
    (pairs(s4=(torch.zeros(2, 3, dtype=torch.float64), 0)), 4, "input",
     "dtype float64 is not one the format holds; cast it to float32"),
    (pairs(s5=(torch.zeros(2, 3), True)), 5, "label", "a bool cannot be packed"),
    ([{"x": 1, "mask": 2}, {"x": 1, "mask": 2}, {"x": 1}], 2, "mask", "missing"),
    ([{"x": 1}, {"x": 1, "extra": 2}], 1, "extra", "not a field of sample 0"),
    ([{"x": 1, "y": 2}, {"x": 3}], 1, "y", "missing"),
])
def test_inconsistent_sample_is_named(tmp_path, data, index, field, words):
    with pytest.raises(SampleError) as info:
        write_dataset(tmp_path / "out", data)
    assert (info.value.index, info.value.field) == (index, field)
    assert str(info.value).startswith(f"sample {index}, field '{field}': ")
    assert words in str(info.value)
    assert not (tmp_path / "out" / "dataset.json").exists()


@pytest.mark.parametrize("bad,index", [(3, 5), (-1, 6), (100, 0)])
def test_label_outside_classes_is_named(tmp_path, bad, index):
    data = [(torch.zeros(1), bad if i == index else 0) for i in range(8)]
    with pytest.raises(SampleError, match=rf"sample {index}, field 'label': label {bad} is "
                                          r"outside \[0, 3\)"):
        write_dataset(tmp_path / "out", data, classes={"label": 3})


def test_label_outside_classes_in_arrays_names_the_row(tmp_path):
    labels = np.zeros(50, dtype=np.int32)
    labels[37] = 10
    with pytest.raises(SampleError, match=r"sample 37, field 'y': label 10 is outside \[0, 10\)"):
        write_arrays(tmp_path / "out", {"y": labels}, classes={"y": 10}, shard_size=16)
    assert not (tmp_path / "out" / "dataset.json").exists()


def test_non_finite_values_are_allowed(tmp_path):
    values = [math.nan, math.inf, -math.inf, 1.0]
    write_dataset(tmp_path / "out", [(torch.tensor([v]), 0) for v in values])
    np.testing.assert_array_equal(load(tmp_path / "out")["input"][:, 0],
                                  np.array(values, dtype=np.float32))


def test_classes_on_unknown_or_float_field_is_refused(tmp_path):
    with pytest.raises(PackError, match="classes names field 'lable'"):
        write_dataset(tmp_path / "a", pairs(), classes={"lable": 3})
    with pytest.raises(PackError, match="field 'input': classes is for integer fields"):
        write_dataset(tmp_path / "b", pairs(), classes={"input": 3})


def test_float64_array_is_refused_with_the_fix(tmp_path):
    with pytest.raises(PackError, match="field 'x': dtype float64 .* cast it to float32"):
        write_arrays(tmp_path / "out", {"x": np.zeros(3)})


def test_tuple_without_names_is_refused(tmp_path):
    with pytest.raises(SampleError, match="sample 0: a 3-tuple: name its fields"):
        write_dataset(tmp_path / "out", [(1, 2, 3)])


def test_non_empty_out_is_refused_unless_force(tmp_path):
    write_arrays(tmp_path / "out", {"x": np.arange(3)})
    with pytest.raises(PackError, match="is not empty; .* --force"):
        write_arrays(tmp_path / "out", {"x": np.arange(4)})
    write_arrays(tmp_path / "out", {"y": np.arange(5)}, force=True, shard_size=2)
    assert list(load(tmp_path / "out")) == ["y"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "dataset.json", "shard-00000", "shard-00001", "shard-00002"]
    write_arrays(tmp_path / "out", {"z": np.arange(2)}, force=True)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["dataset.json", "z.npy"]


def test_force_does_not_wipe_files_it_did_not_write(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "thesis.tex").write_text("precious")
    with pytest.raises(PackError, match="holds thesis.tex, which fulcrum-pack does not write"):
        write_arrays(tmp_path / "home", {"x": np.arange(3)}, force=True)
    assert (tmp_path / "home" / "thesis.tex").read_text() == "precious"


def test_crash_mid_pack_leaves_no_dataset_json(tmp_path):
    class Broken(torch.utils.data.Dataset):
        def __len__(self):
            return 10

        def __getitem__(self, i):
            if i == 6:
                raise RuntimeError("disk on fire")
            return torch.ones(2), 0

    with pytest.raises(RuntimeError, match="disk on fire"):
        write_dataset(tmp_path / "out", Broken(), shard_size=4)
    assert (tmp_path / "out" / "shard-00000" / "dataset.json").exists()  # shard 0 finished
    assert not (tmp_path / "out" / "dataset.json").exists()
    with pytest.raises(PackError, match="dataset.json is missing"):
        load(tmp_path / "out")


def test_cli_refusal_exits_2_naming_sample_and_field(tmp_path, cli):
    (tmp_path / "mydata.py").write_text(
        "import torch\n"
        "def build():\n"
        "    return [(torch.zeros(3 if i != 4 else 5), i % 2) for i in range(9)]\n"
        "def labels():\n"
        "    return [(torch.zeros(3), i) for i in range(9)]\n")
    result = cli("dataset", "mydata:build", tmp_path / "out", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "fulcrum-pack: error: sample 4, field 'input': shape [5], but sample 0's is [3]" \
        in result.stderr
    assert "left without dataset.json" in result.stderr
    assert "Traceback" not in result.stderr

    result = cli("dataset", "mydata:labels", tmp_path / "out2", "--classes", "label=8",
                 cwd=tmp_path)
    assert result.returncode == 2
    assert "sample 8, field 'label': label 8 is outside [0, 8)" in result.stderr

    result = cli("dataset", "mydata:labels", tmp_path / "out", cwd=tmp_path)
    assert result.returncode == 2 and "is not empty" in result.stderr
    result = cli("dataset", "mydata:labels", tmp_path / "out", "--force", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
