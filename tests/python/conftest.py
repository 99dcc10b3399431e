"""Shared helpers for the tests of python/: import from the source tree (python/), run the
fulcrum-pack CLI as a subprocess, and read a packed dataset back with nothing but numpy.load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON_DIR = ROOT / "python"
sys.path.insert(0, str(PYTHON_DIR))

# The runtime's protocol messages, generated from proto/ into the source tree (git-ignored), as
# `pip install` does at build time; a no-op when they are newer than the .proto.
from fulcrum import stubs  # noqa: E402

stubs.generate()


def run_cli(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """fulcrum-pack ARGS, run as `python3 -m fulcrum.pack` on the source tree."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PYTHON_DIR), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "fulcrum.pack", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def numpy_read_back(directory: Path) -> dict[str, np.ndarray]:
    """Every field, read the way any NumPy user would: dataset.json, then numpy.load with
    mmap_mode="r" on each file (shards concatenated in listed order). No fulcrum code."""
    header = json.loads((directory / "dataset.json").read_text())
    assert header["format"] == "fulcrum.dataset" and header["version"] == 1
    parts = [directory / s for s in header["shards"]] if "shards" in header else [directory]
    fields: dict[str, list[np.ndarray]] = {}
    for part in parts:
        part_header = json.loads((part / "dataset.json").read_text())
        for field in part_header["fields"]:
            array = np.load(part / field["file"], mmap_mode="r")
            assert isinstance(array, np.memmap)
            assert array.shape == (part_header["samples"],) + tuple(field["shape"])
            fields.setdefault(field["name"], []).append(array)
    return {name: np.concatenate(arrays) for name, arrays in fields.items()}


@pytest.fixture
def cli():
    return run_cli
