"""fulcrum-pack run as a process: each command packs, prints progress with samples/s on
stderr and a summary on stdout, and its output reads back with numpy.load."""

from __future__ import annotations

import json

import numpy as np
from PIL import Image

from conftest import numpy_read_back


def test_help_and_missing_command(cli):
    result = cli("--help")
    assert result.returncode == 0
    for word in ("image-folder", "arrays", "dataset", "--inspect"):
        assert word in result.stdout
    result = cli()
    assert result.returncode == 2 and "give a COMMAND" in result.stderr


def test_image_folder_command(tmp_path, cli):
    for label, (name, colour) in enumerate([("cat", (200, 0, 0)), ("dog", (0, 0, 200))]):
        (tmp_path / "src" / name).mkdir(parents=True)
        for k in range(3):
            Image.new("RGB", (12 + k, 10), colour).save(tmp_path / "src" / name / f"{k}.png")
    result = cli("image-folder", tmp_path / "src", tmp_path / "out", "--image-size", 8,
                 "--shard-size", 4)
    assert result.returncode == 0, result.stderr
    assert "samples/s" in result.stderr and "6/6 samples (100%)" in result.stderr
    assert "wrote 6 samples in 2 shards" in result.stdout
    data = numpy_read_back(tmp_path / "out")
    np.testing.assert_array_equal(data["label"], [0, 0, 0, 1, 1, 1])
    assert data["image"].shape == (6, 3, 8, 8)
    assert (data["image"][:3, 0] == 200).all() and (data["image"][3:, 2] == 200).all()
    shard = json.loads((tmp_path / "out" / "shard-00000" / "dataset.json").read_text())
    assert shard["meta"]["class_names"] == ["cat", "dog"]


def test_arrays_command(tmp_path, cli):
    np.save(tmp_path / "x.npy", np.arange(20, dtype=np.float16).reshape(10, 2))
    np.save(tmp_path / "y.npy", np.arange(10, dtype=np.int64) % 5)
    result = cli("arrays", tmp_path / "out", f"x={tmp_path / 'x.npy'}",
                 f"label={tmp_path / 'y.npy'}", "--classes", "label=5", "--quiet")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "wrote 10 samples" in result.stdout and "label: min 0, max 4" in result.stdout
    data = numpy_read_back(tmp_path / "out")
    np.testing.assert_array_equal(data["x"], np.load(tmp_path / "x.npy"))
    header = json.loads((tmp_path / "out" / "dataset.json").read_text())
    assert header["fields"][1]["classes"] == 5

    result = cli("arrays", tmp_path / "out2", "x=missing.npy")
    assert result.returncode == 2 and "field 'x': missing.npy does not exist" in result.stderr
    result = cli("arrays", tmp_path / "out3", f"x={tmp_path / 'x.npy'}", "--classes", "x=oops")
    assert result.returncode == 2 and "expected name=K" in result.stderr


def test_dataset_command(tmp_path, cli):
    (tmp_path / "mydata.py").write_text(
        "import torch\n"
        "class Toy(torch.utils.data.Dataset):\n"
        "    def __len__(self):\n"
        "        return 50\n"
        "    def __getitem__(self, i):\n"
        "        return torch.full((4,), float(i)), torch.tensor(i % 7), i\n"
        "def make():\n"
        "    return Toy()\n")
    result = cli("dataset", "mydata:make", tmp_path / "out", "--fields", "x,y,idx",
                 "--classes", "y=7", "--shard-size", 20, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "50/50 samples (100%)" in result.stderr
    data = numpy_read_back(tmp_path / "out")
    np.testing.assert_array_equal(data["x"][:, 0], np.arange(50, dtype=np.float32))
    np.testing.assert_array_equal(data["y"], np.arange(50) % 7)
    np.testing.assert_array_equal(data["idx"], np.arange(50))
    shard = json.loads((tmp_path / "out" / "shard-00002" / "dataset.json").read_text())
    assert shard["samples"] == 10 and shard["meta"] == {"source": "dataset mydata:make"}

    result = cli("dataset", "nosuchmodule:make", tmp_path / "o2", cwd=tmp_path)
    assert result.returncode == 2 and "cannot import 'nosuchmodule'" in result.stderr
    result = cli("dataset", "mydata:make", tmp_path / "o3", cwd=tmp_path)
    assert result.returncode == 2 and "a 3-tuple: name its fields" in result.stderr
