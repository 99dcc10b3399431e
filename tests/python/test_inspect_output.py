"""inspect() and `fulcrum-pack --inspect` report fields, dtypes, shapes, samples, shards,
size on disk, the label range and the class histogram."""

from __future__ import annotations

import json

import numpy as np

from fulcrum.pack import inspect, write_arrays


def test_inspect_dict(tmp_path):
    labels = np.array([0, 2, 2, 1, 2, 0, 2])
    write_arrays(tmp_path / "d", {"image": np.zeros((7, 3, 2, 2), np.uint8), "label": labels},
                 classes={"label": 4}, meta={"class_names": ["a", "b", "c", "d"]}, shard_size=3)
    info = inspect(tmp_path / "d")
    assert info["samples"] == 7
    assert info["shards"] == ["shard-00000", "shard-00001", "shard-00002"]
    assert [(f["name"], f["dtype"], f["shape"]) for f in info["fields"]] == [
        ("image", "uint8", [3, 2, 2]), ("label", "int64", [])]
    assert info["labels"] == {"label": {"min": 0, "max": 2, "histogram": [2, 1, 4, 0]}}
    files = sorted(p for p in (tmp_path / "d").rglob("*") if p.is_file())
    assert info["disk_bytes"] == sum(p.stat().st_size for p in files)
    assert info["fields"][0]["bytes"] == sum(
        p.stat().st_size for p in files if p.name == "image.npy")
    assert info["meta"]["class_names"] == ["a", "b", "c", "d"]


def test_inspect_cli_text(tmp_path, cli):
    write_arrays(tmp_path / "d", {"tokens": np.ones((5, 8), np.int32),
                                  "label": np.array([1, 1, 0, 2, 1])}, classes={"label": 3},
                 meta={"source": "unit test", "class_names": ["x", "y", "z"]})
    result = cli("--inspect", tmp_path / "d")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "samples  5" in out and "shards   none" in out and "on disk" in out
    assert "tokens" in out and "int32" in out and "[8]" in out
    assert "label" in out and "int64" in out and "classes=3" in out
    assert "labels   label: min 0, max 2" in out
    assert "histogram 0:1 1:3 2:1" in out
    assert "classes  3: x, y, z" in out and "source   unit test" in out


def test_inspect_cli_summarises_many_classes_and_json(tmp_path, cli):
    write_arrays(tmp_path / "d", {"label": np.arange(100) % 50}, classes={"label": 60})
    result = cli("--inspect", tmp_path / "d")
    assert "60 classes: fewest 0 (class 50), most 2 (class 0), 10 empty" in result.stdout
    result = cli("--inspect", tmp_path / "d", "--json")
    assert json.loads(result.stdout)["labels"]["label"]["max"] == 49


def test_inspect_cli_refuses_a_broken_dataset(tmp_path, cli):
    write_arrays(tmp_path / "d", {"x": np.arange(4)})
    (tmp_path / "d" / "x.npy").write_bytes((tmp_path / "d" / "x.npy").read_bytes()[:-1])
    result = cli("--inspect", tmp_path / "d")
    assert result.returncode == 2
    assert "x.npy" in result.stderr and "truncated" in result.stderr
