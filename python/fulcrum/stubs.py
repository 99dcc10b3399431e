"""Generates the protocol's Python messages from proto/fulcrum/v1 with protoc.

The generated `fulcrum/v1/coordinator_pb2.py` is never edited or committed: setup.py runs this
module when the package is built, and a source checkout runs `python3 -m fulcrum.stubs`.
Only the messages are generated. The client calls the one streaming method through
`grpc.Channel.stream_stream` with the method's full name read from the generated service
descriptor, so it needs neither grpc_python_plugin nor grpcio-tools.

protoc comes from grpcio-tools when that is installed (its protoc matches the pip protobuf
runtime), else from $PATH (Debian: protobuf-compiler, matching python3-protobuf).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent  # python/fulcrum
PROTO_FILES = ("fulcrum/v1/coordinator.proto",)


class StubsMissingError(ImportError):
    """The generated messages are not there (a source checkout that never generated them)."""


def default_proto_dir() -> Path:
    """$FULCRUM_PROTO_DIR, else the repository's proto/ beside python/."""
    override = os.environ.get("FULCRUM_PROTO_DIR")
    if override:
        return Path(override)
    return PACKAGE_DIR.parent.parent / "proto"


def _protoc_command() -> list[str]:
    try:
        import grpc_tools  # noqa: F401  (only whether it is there)
        return [sys.executable, "-m", "grpc_tools.protoc"]
    except ImportError:
        pass
    protoc = shutil.which("protoc")
    if protoc is None:
        raise RuntimeError(
            "cannot generate fulcrum's protocol messages: no protoc on $PATH and no grpcio-tools; "
            "install protobuf-compiler (Debian) or `pip install grpcio-tools`")
    return [protoc]


def _outputs(out_root: Path) -> list[Path]:
    return [out_root / proto.replace(".proto", "_pb2.py") for proto in PROTO_FILES]


def up_to_date(proto_dir: Path, out_root: Path) -> bool:
    """Every output exists and is newer than its .proto."""
    for proto, output in zip(PROTO_FILES, _outputs(out_root)):
        source = proto_dir / proto
        if not output.exists():
            return False
        if source.exists() and source.stat().st_mtime > output.stat().st_mtime:
            return False
    return True


def generate(proto_dir: Path | None = None, out_root: Path | None = None,
             force: bool = False) -> list[Path]:
    """Runs protoc on PROTO_FILES into out_root (default: python/, so fulcrum/v1/ receives them).
    Returns the generated files. Does nothing when they are newer than the .proto files."""
    proto_dir = Path(proto_dir) if proto_dir else default_proto_dir()
    out_root = Path(out_root) if out_root else PACKAGE_DIR.parent
    outputs = _outputs(out_root)
    if not force and up_to_date(proto_dir, out_root):
        return outputs
    missing = [proto for proto in PROTO_FILES if not (proto_dir / proto).exists()]
    if missing:
        raise FileNotFoundError(
            "cannot generate fulcrum's protocol messages: "
            f"{proto_dir / missing[0]} does not exist; "
            "build from a checkout of the repository (python/ beside proto/) or set "
            "FULCRUM_PROTO_DIR to the directory that holds fulcrum/v1/coordinator.proto")
    out_root.mkdir(parents=True, exist_ok=True)
    # protoc writes into a private folder and each output is renamed into place, so a process
    # importing the messages while another generates them (two test runs side by side) reads
    # the old file or the new one, never half of one.
    with tempfile.TemporaryDirectory(dir=out_root, prefix=".stubs-") as scratch:
        command = _protoc_command() + [f"--proto_path={proto_dir}", f"--python_out={scratch}",
                                       *PROTO_FILES]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"protoc failed ({' '.join(command)}):\n{result.stderr}")
        for generated, output in zip(_outputs(Path(scratch)), outputs):
            output.parent.mkdir(parents=True, exist_ok=True)
            os.replace(generated, output)
    return outputs


def load():
    """The generated module fulcrum.v1.coordinator_pb2, or StubsMissingError saying how to
    make it."""
    try:
        from fulcrum.v1 import coordinator_pb2
    except ImportError as error:
        if "coordinator_pb2" not in str(error):
            raise
        raise StubsMissingError(
            "fulcrum's protocol messages (fulcrum/v1/coordinator_pb2.py) are not generated: "
            "install the package (pip install ./python) or, in a source checkout, run "
            "`python3 -m fulcrum.stubs` in python/") from error
    return coordinator_pb2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m fulcrum.stubs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--proto-dir", type=Path, help="directory holding fulcrum/v1/*.proto "
                        "(default: $FULCRUM_PROTO_DIR or the repository's proto/)")
    parser.add_argument("--out", type=Path, help="output root (default: python/)")
    parser.add_argument("--force", action="store_true", help="regenerate even if up to date")
    arguments = parser.parse_args(argv)
    try:
        for path in generate(arguments.proto_dir, arguments.out, arguments.force):
            print(path)
    except (OSError, RuntimeError) as error:
        print(f"fulcrum.stubs: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
