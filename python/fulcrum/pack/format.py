"""The packed dataset format of docs/dataset-format.md: its dtype table, dataset.json and the
checks a reader makes.

This module is the one place that knows the contract, so that the writer and the reader
cannot drift apart: the writer builds `FieldSpec`s and `header_json`, the reader validates
with `read_layout`, and the tests read every dataset they write back through it.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

FORMAT = "fulcrum.dataset"
VERSION = 1
HEADER = "dataset.json"

# dtype name in dataset.json -> the `descr` of its .npy file. bfloat16 has no NumPy dtype, so
# its files hold the raw 16 bits as little-endian uint16 and only dataset.json says bfloat16.
DTYPES: dict[str, str] = {
    "uint8": "|u1",
    "int8": "|i1",
    "int16": "<i2",
    "int32": "<i4",
    "int64": "<i8",
    "float16": "<f2",
    "bfloat16": "<u2",
    "float32": "<f4",
}
INTEGER_DTYPES = frozenset({"uint8", "int8", "int16", "int32", "int64"})

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NAME_MAX = 64
SHARD_NAME = "shard-{:05d}"

_TOP_KEYS = {"format", "version", "samples", "fields", "meta"}
# The doc's example of a sharded top level holds only these three; `samples` and `meta` are
# accepted there too (the key table allows them) but fulcrum-pack does not write them.
_SHARDED_TOP_KEYS = {"format", "version", "shards", "samples", "meta"}
_FIELD_KEYS = {"name", "dtype", "shape", "file", "classes"}


class PackError(Exception):
    """A refusal the user can fix; the CLI prints it and exits 2, without a traceback."""


class FormatError(PackError):
    """A dataset directory that does not follow docs/dataset-format.md."""


class SampleError(PackError):
    """A sample that does not fit the fields sample 0 set; names the sample and the field."""

    def __init__(self, index: int, field_name: Optional[str], problem: str) -> None:
        where = f"sample {index}" + (f", field '{field_name}'" if field_name else "")
        super().__init__(f"{where}: {problem}")
        self.index = index
        self.field = field_name
        self.problem = problem


def _is_int(value: Any) -> bool:
    # bool is an int in Python, but `true` is not a count in JSON.
    return isinstance(value, int) and not isinstance(value, bool)


def check_name(name: Any, what: str = "field name") -> str:
    """Refuses a name the trainer could not use as a `forward` argument."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name) or len(name) > NAME_MAX:
        raise PackError(
            f"{what} {name!r} is not allowed: use [A-Za-z_][A-Za-z0-9_]*, "
            f"at most {NAME_MAX} characters")
    return name


def check_plain_file_name(name: Any, what: str) -> str:
    """Refuses a path that would leave the dataset directory."""
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
        raise FormatError(f"{what} {name!r} must be a plain file name (no '/', not '..')")
    return name


@dataclass(frozen=True)
class FieldSpec:
    """One field: what a single sample of it is, and which .npy file holds all samples."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str = ""
    classes: Optional[int] = None

    def __post_init__(self) -> None:
        check_name(self.name)
        if self.dtype not in DTYPES:
            raise PackError(
                f"field '{self.name}': dtype {self.dtype!r} is not one of {', '.join(DTYPES)}")
        shape = tuple(self.shape)
        if not all(_is_int(d) and d > 0 for d in shape):
            raise PackError(
                f"field '{self.name}': shape {list(shape)} must be positive integers "
                "(an empty dimension cannot be packed)")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "file", self.file or f"{self.name}.npy")
        check_plain_file_name(self.file, f"field '{self.name}': file")
        if self.classes is not None:
            if self.dtype not in INTEGER_DTYPES:
                raise PackError(
                    f"field '{self.name}': classes is for integer fields, and this one is "
                    f"{self.dtype}")
            if not _is_int(self.classes) or self.classes < 1:
                raise PackError(
                    f"field '{self.name}': classes must be a positive integer, not "
                    f"{self.classes!r}")

    @property
    def descr(self) -> str:
        return DTYPES[self.dtype]

    @property
    def numpy_dtype(self) -> np.dtype:
        """The dtype of the .npy file (uint16 for bfloat16)."""
        return np.dtype(self.descr)

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "name": self.name, "dtype": self.dtype, "shape": list(self.shape), "file": self.file}
        if self.classes is not None:
            obj["classes"] = self.classes
        return obj

    @classmethod
    def from_json(cls, obj: Any, where: str) -> "FieldSpec":
        if not isinstance(obj, dict):
            raise FormatError(f"{where}: a field must be a JSON object")
        unknown = set(obj) - _FIELD_KEYS
        if unknown:
            raise FormatError(f"{where}: unknown key(s) {sorted(unknown)}; free-form data goes "
                              "in the top-level 'meta'")
        missing = {"name", "dtype", "shape"} - set(obj)
        if missing:
            raise FormatError(f"{where}: missing key(s) {sorted(missing)}")
        if not isinstance(obj["shape"], list):
            raise FormatError(f"{where}: shape must be a list")
        if "file" in obj:
            check_plain_file_name(obj["file"], f"{where}: file")
        try:
            return cls(obj["name"], obj["dtype"], tuple(obj["shape"]), obj.get("file", ""),
                       obj.get("classes"))
        except FormatError:
            raise
        except PackError as e:
            raise FormatError(f"{where}: {e}") from None

    def same_as(self, other: "FieldSpec") -> bool:
        """Whether two shards hold the same field (the file name may differ)."""
        return (self.name, self.dtype, self.shape, self.classes) == (
            other.name, other.dtype, other.shape, other.classes)


def header_json(samples: int, fields: list[FieldSpec],
                meta: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The dataset.json of one directory of fields."""
    obj: dict[str, Any] = {"format": FORMAT, "version": VERSION, "samples": samples,
                           "fields": [f.to_json() for f in fields]}
    if meta:
        obj["meta"] = meta
    return obj


def sharded_header_json(shards: list[str]) -> dict[str, Any]:
    """The top-level dataset.json of a sharded dataset, exactly as the doc's example."""
    return {"format": FORMAT, "version": VERSION, "shards": list(shards)}


def dumps_header(obj: dict[str, Any]) -> str:
    """dataset.json's text: one line per top-level key and per field, for reading by eye."""
    def one(value: Any) -> str:
        return json.dumps(value)  # ASCII: \u escapes, so any JSON reader takes it

    lines = []
    for key, value in obj.items():
        if key == "fields":
            inner = ",\n".join(f"    {one(f)}" for f in value)
            lines.append(f'  "fields": [\n{inner}\n  ]')
        else:
            lines.append(f"  {one(key)}: {one(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def write_header(directory: Path, obj: dict[str, Any]) -> None:
    """Writes dataset.json atomically (temp file, fsync, rename): a reader sees either no
    dataset.json or a complete one, so a crashed pack never looks complete."""
    directory = Path(directory)
    text = dumps_header(obj)
    fd, tmp = tempfile.mkstemp(prefix=".dataset.json.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, directory / HEADER)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_header(directory: Path) -> dict[str, Any]:
    path = Path(directory) / HEADER
    if not path.is_file():
        raise FormatError(f"{path} is missing: not a packed dataset, or its pack did not finish")
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise FormatError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise FormatError(f"{path}: must hold a JSON object")
    if obj.get("format") != FORMAT:
        raise FormatError(f"{path}: 'format' must be {FORMAT!r}, not {obj.get('format')!r}")
    if not (_is_int(obj.get("version")) and obj["version"] == VERSION):
        raise FormatError(f"{path}: 'version' must be {VERSION}, not {obj.get('version')!r}")
    return obj


@dataclass(frozen=True)
class Part:
    """A directory holding one .npy file per field: a whole unsharded dataset, or one shard."""

    path: Path
    samples: int
    fields: list[FieldSpec]
    meta: dict[str, Any] = field(default_factory=dict)

    def file(self, spec: FieldSpec) -> Path:
        return self.path / spec.file


@dataclass(frozen=True)
class Layout:
    """A validated dataset: its fields, its total samples, and the parts that hold them."""

    path: Path
    fields: list[FieldSpec]
    samples: int
    parts: list[Part]
    sharded: bool
    meta: dict[str, Any]


def _read_part(directory: Path) -> Part:
    obj = read_header(directory)
    where = str(Path(directory) / HEADER)
    if "shards" in obj:
        raise FormatError(f"{where}: a shard cannot itself list shards")
    unknown = set(obj) - _TOP_KEYS
    if unknown:
        raise FormatError(f"{where}: unknown key(s) {sorted(unknown)}; free-form data goes in "
                          "'meta'")
    samples = obj.get("samples")
    if not _is_int(samples) or samples < 1:
        raise FormatError(f"{where}: 'samples' must be an integer >= 1, not {samples!r}")
    raw_fields = obj.get("fields")
    if not isinstance(raw_fields, list) or not raw_fields:
        raise FormatError(f"{where}: 'fields' must be a non-empty list")
    fields = [FieldSpec.from_json(f, f"{where}: fields[{i}]") for i, f in enumerate(raw_fields)]
    names = [f.name for f in fields]
    if len(set(names)) != len(names):
        raise FormatError(f"{where}: field names must be unique, got {names}")
    meta = obj.get("meta", {})
    if not isinstance(meta, dict):
        raise FormatError(f"{where}: 'meta' must be a JSON object")
    part = Part(Path(directory), samples, fields, meta)
    for spec in fields:
        check_npy(part.file(spec), spec, samples)
    return part


def read_layout(path: Path) -> Layout:
    """Reads and checks a dataset directory the way the trainer does: dataset.json, every
    shard's, and every .npy header and size. Raises FormatError naming the file at fault."""
    path = Path(path)
    obj = read_header(path)
    if "shards" not in obj:
        part = _read_part(path)
        return Layout(path, part.fields, part.samples, [part], False, part.meta)
    where = str(path / HEADER)
    unknown = set(obj) - _SHARDED_TOP_KEYS
    if unknown:
        raise FormatError(f"{where}: unknown key(s) {sorted(unknown)} beside 'shards'")
    shards = obj["shards"]
    if not isinstance(shards, list) or not shards:
        raise FormatError(f"{where}: 'shards' must be a non-empty list of directory names")
    parts = [_read_part(path / check_plain_file_name(s, f"{where}: shard")) for s in shards]
    first = parts[0]
    for part in parts[1:]:
        if len(part.fields) != len(first.fields) or not all(
                a.same_as(b) for a, b in zip(first.fields, part.fields)):
            raise FormatError(
                f"{part.path / HEADER}: its fields differ from those of {first.path / HEADER}; "
                "every shard must hold the same fields (name, dtype, shape, classes, order)")
    total = sum(p.samples for p in parts)
    if "samples" in obj and obj["samples"] != total:
        raise FormatError(f"{where}: 'samples' is {obj['samples']!r} but the shards hold {total}")
    return Layout(path, first.fields, total, parts, True, first.meta)


def check_npy(path: Path, spec: FieldSpec, samples: int) -> int:
    """Checks a field's .npy header and size against dataset.json; returns the data offset."""
    if not path.is_file():
        raise FormatError(f"{path}: missing (field '{spec.name}')")
    with open(path, "rb") as f:
        try:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version in ((2, 0), (3, 0)):
                # 3.0 differs from 2.0 only in allowing utf-8 in structured dtype names.
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unsupported .npy version {version}")
        except ValueError as e:
            raise FormatError(f"{path}: not a readable .npy file ({e})") from None
        offset = f.tell()
    if fortran:
        raise FormatError(f"{path}: fortran_order must be False (C order)")
    if dtype.str != spec.descr:
        raise FormatError(f"{path}: descr is {dtype.str!r}, but field '{spec.name}' is "
                          f"{spec.dtype}, stored as {spec.descr!r}")
    want = (samples,) + spec.shape
    if tuple(shape) != want:
        raise FormatError(f"{path}: shape {list(shape)}, but dataset.json says "
                          f"{list(want)} ([samples] + shape)")
    size = os.path.getsize(path)
    expected = offset + samples * int(np.prod(spec.shape, dtype=np.int64)) * dtype.itemsize
    if size != expected:
        raise FormatError(f"{path}: {size} bytes, but its header and shape make {expected} "
                          f"({'truncated' if size < expected else 'padded'})")
    return offset


def bfloat16_to_float32(bits: np.ndarray) -> np.ndarray:
    """Widens bfloat16 bits (as stored, uint16) to float32 values, exactly."""
    return (np.asarray(bits, dtype="<u2").astype("<u4") << 16).view("<f4")
