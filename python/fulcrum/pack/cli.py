"""The fulcrum-pack command line: pack an image folder, .npy arrays or a Python Dataset into
the format of docs/dataset-format.md, or inspect a packed dataset.

Refusals (inconsistent samples, a label out of range, a non-empty OUT, a broken dataset) print
one line naming what is wrong and how to fix it, and exit 2; progress goes to stderr, the
summary to stdout.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .format import HEADER, PackError, SampleError
from .images import pack_image_folder
from .inspect import inspect
from .progress import Progress
from .sources import write_arrays, write_dataset

EXIT_REFUSED = 2


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _classes(items: Optional[list[str]]) -> dict[str, int]:
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not value.strip().isdigit():
            raise PackError(f"--classes {item!r}: expected name=K, e.g. label=10")
        out[name] = int(value)
    return out


def _load_arrays(items: Sequence[str]) -> dict[str, np.ndarray]:
    arrays = {}
    for item in items:
        name, sep, file = item.partition("=")
        if not sep or not name or not file:
            raise PackError(f"{item!r}: expected name=file.npy, e.g. image=images.npy")
        if name in arrays:
            raise PackError(f"field '{name}' is given twice")
        try:
            arrays[name] = np.load(file, mmap_mode="r")
        except FileNotFoundError:
            raise PackError(f"field '{name}': {file} does not exist") from None
        except (ValueError, OSError) as e:
            raise PackError(f"field '{name}': {file} is not a plain .npy array ({e})") from None
    return arrays


def _load_callable(spec: str) -> Callable[[], Any]:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise PackError(f"{spec!r}: expected MODULE:CALLABLE, e.g. mydata:train_set")
    # Like `python -m`: modules in the current directory are importable.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise PackError(f"cannot import {module_name!r} ({e}); run from its directory or set "
                        "PYTHONPATH") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PackError(f"{module_name} has no attribute {attr!r}") from None
    if not callable(obj):
        raise PackError(f"{spec} is not callable; it must be a function returning a Dataset")
    return obj


def _describe_field(f: dict[str, Any]) -> str:
    classes = f"classes={f['classes']}" if "classes" in f else ""
    return f"{f['name']:<12} {f['dtype']:<9} {str(f['shape']):<14} {classes:<12}".rstrip()


def _print_summary(out: Path, seconds: float) -> None:
    info = inspect(out)
    shards = f" in {len(info['shards'])} shards" if info["shards"] else ""
    print(f"fulcrum-pack: wrote {info['samples']} samples{shards} to {out} "
          f"({_size(info['disk_bytes'])}) in {seconds:.1f}s "
          f"({info['samples'] / max(seconds, 1e-9):.0f} samples/s)")
    for f in info["fields"]:
        print(f"  {_describe_field(f)}")
    for name, summary in info["labels"].items():
        print(f"  {name}: min {summary['min']}, max {summary['max']}")


def _histogram_lines(hist: list[int]) -> list[str]:
    if len(hist) <= 20:
        return ["histogram " + " ".join(f"{k}:{c}" for k, c in enumerate(hist))]
    lo, hi = int(np.argmin(hist)), int(np.argmax(hist))
    empty = sum(1 for c in hist if c == 0)
    return [f"{len(hist)} classes: fewest {hist[lo]} (class {lo}), most {hist[hi]} "
            f"(class {hi}), {empty} empty"]


def print_inspect(path: Path, as_json: bool) -> None:
    info = inspect(path)
    if as_json:
        print(json.dumps(info, indent=2))
        return
    print(f"dataset  {info['path']}")
    print(f"samples  {info['samples']}")
    if info["shards"]:
        print(f"shards   {len(info['shards'])} ({info['shards'][0]} .. {info['shards'][-1]})")
    else:
        print("shards   none")
    print(f"size     {_size(info['disk_bytes'])} on disk")
    print("fields")
    for f in info["fields"]:
        print(f"  {_describe_field(f):<50} {f['file']}  {_size(f['bytes'])}")
    for name, summary in info["labels"].items():
        print(f"labels   {name}: min {summary['min']}, max {summary['max']}")
        if "histogram" in summary:
            for line in _histogram_lines(summary["histogram"]):
                print(f"  {line}")
    names = info["meta"].get("class_names")
    if isinstance(names, list):
        shown = ", ".join(map(str, names[:10])) + (", ..." if len(names) > 10 else "")
        print(f"classes  {len(names)}: {shown}")
    if "source" in info["meta"]:
        print(f"source   {info['meta']['source']}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fulcrum-pack",
        description="Write a dataset in Fulcrum's packed format (docs/dataset-format.md): "
                    "dataset.json plus one .npy per field, memory-mapped by fulcrum-trainer.")
    parser.add_argument("--inspect", metavar="DIR", type=Path,
                        help="check a packed dataset and print its fields, sizes and labels")
    parser.add_argument("--json", action="store_true", help="with --inspect: print JSON")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def common(p: argparse.ArgumentParser, shards: bool = True) -> None:
        p.add_argument("out", metavar="OUT", type=Path, help="output directory (new or empty)")
        p.add_argument("--force", action="store_true",
                       help="replace a dataset already packed into OUT")
        p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
        if shards:
            p.add_argument("--shard-size", type=int, metavar="N",
                           help="split into shard directories of N samples each")

    p = sub.add_parser("image-folder", help="pack SRC/<class>/<image> (torchvision ImageFolder)")
    p.add_argument("src", metavar="SRC", type=Path)
    common(p)
    p.add_argument("--image-size", type=int, required=True, metavar="N",
                   help="resize the shorter side to N, then center-crop N x N")

    p = sub.add_parser("arrays", help="pack .npy files, one field each (first axis = sample)")
    common(p)
    p.add_argument("arrays", metavar="name=file.npy", nargs="+")
    p.add_argument("--classes", action="append", metavar="name=K",
                   help="labels of field name lie in [0, K); checked while packing")

    p = sub.add_parser("dataset", help="pack the Dataset that MODULE:CALLABLE() returns")
    p.add_argument("callable", metavar="MODULE:CALLABLE")
    common(p)
    p.add_argument("--fields", metavar="a,b",
                   help="field names of tuple samples (default input,label for pairs), or "
                        "the keys of dict samples to keep, in order")
    p.add_argument("--classes", action="append", metavar="name=K",
                   help="labels of field name lie in [0, K); checked while packing")
    return parser


def run(args: argparse.Namespace) -> None:
    if args.inspect is not None:
        print_inspect(args.inspect, args.json)
        return
    progress = None if args.quiet else Progress()
    start = time.monotonic()
    if args.command == "image-folder":
        pack_image_folder(args.src, args.out, args.image_size, args.shard_size,
                          force=args.force, progress=progress)
    elif args.command == "arrays":
        write_arrays(args.out, _load_arrays(args.arrays), classes=_classes(args.classes),
                     meta={"source": "arrays " + " ".join(args.arrays)},
                     shard_size=args.shard_size, force=args.force, progress=progress)
    else:
        classes = _classes(args.classes)
        fields = [f.strip() for f in args.fields.split(",")] if args.fields else None
        dataset = _load_callable(args.callable)()
        start = time.monotonic()  # time the pack, not the building of the dataset
        write_dataset(args.out, dataset, fields, classes, args.shard_size,
                      meta={"source": f"dataset {args.callable}"}, force=args.force,
                      progress=progress)
    _print_summary(args.out, time.monotonic() - start)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.inspect is None and args.command is None:
        parser.error("give a COMMAND (image-folder, arrays, dataset) or --inspect DIR")
    if args.inspect is not None and args.command is not None:
        parser.error("--inspect takes no COMMAND")
    try:
        run(args)
    except PackError as e:
        note = ""
        out = getattr(args, "out", None)
        if isinstance(e, SampleError) and out is not None and out.is_dir() \
                and any(out.iterdir()) and not (out / HEADER).exists():
            note = f" ({out} is left without {HEADER}, so nothing will take it for a dataset)"
        print(f"fulcrum-pack: error: {e}{note}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        print("fulcrum-pack: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
