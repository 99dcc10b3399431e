"""Generates the protocol messages (fulcrum/v1/coordinator_pb2.py) from ../proto before the
package is built, so an installed fulcrum never carries hand-edited or stale stubs.
Everything else about the package is in pyproject.toml."""

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildWithStubs(build_py):
    def run(self):
        # Loaded by path: the fulcrum package itself is not importable yet while it is built.
        spec = importlib.util.spec_from_file_location("fulcrum_stubs",
                                                      HERE / "fulcrum" / "stubs.py")
        stubs = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(stubs)
        stubs.generate(out_root=HERE)
        super().run()


setup(cmdclass={"build_py": BuildWithStubs})
