"""`pip install ./python` into a venv (offline, no build isolation: Debian's setuptools)
installs a working fulcrum-pack console script and the protocol messages generated at build
time."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import PYTHON_DIR


def test_pip_install_gives_a_working_console_script(tmp_path):
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                          capture_output=True, text=True)
    if made.returncode != 0 and "ensurepip" in made.stdout + made.stderr:
        pytest.skip("python3-venv is missing (no ensurepip): apt-get install python3-venv")
    assert made.returncode == 0, made.stdout + made.stderr
    # Install from a copy: an in-tree build would leave build/ and *.egg-info in python/. The
    # copy keeps the repository's layout (python/ beside proto/) and leaves out any generated
    # messages, so the build itself must generate them from the .proto.
    source = tmp_path / "src" / "python"
    shutil.copytree(PYTHON_DIR, source, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", "*_pb2*.py"))
    shutil.copytree(PYTHON_DIR.parent / "proto", tmp_path / "src" / "proto")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                          "--no-build-isolation", "--no-index", str(source)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr

    tool = venv / "bin" / "fulcrum-pack"
    help_ = subprocess.run([str(tool), "--help"], capture_output=True, text=True, env=env,
                           cwd=tmp_path)
    assert help_.returncode == 0, help_.stderr
    assert "image-folder" in help_.stdout

    np.save(tmp_path / "x.npy", np.arange(6, dtype=np.int32))
    packed = subprocess.run([str(tool), "arrays", str(tmp_path / "out"),
                             f"x={tmp_path / 'x.npy'}"], capture_output=True, text=True,
                            env=env, cwd=tmp_path)
    assert packed.returncode == 0, packed.stderr
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import fulcrum.pack; print(fulcrum.pack.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
    assert str(venv) in where.stdout  # the installed copy, not the source tree
    messages = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "from fulcrum.v1 import coordinator_pb2 as pb; print(pb.__file__); "
         "print(pb.Hello(job='a/b').job)"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert messages.returncode == 0, messages.stderr
    assert str(venv) in messages.stdout and "a/b" in messages.stdout
