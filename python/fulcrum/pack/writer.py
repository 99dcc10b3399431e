"""A streaming writer: rows go straight into memory-mapped .npy files.

Each field's file is created at its final size with `numpy.lib.format.open_memmap` and filled
in place, so a dataset larger than RAM packs with bounded memory (the kernel writes dirty
pages back as it goes). dataset.json is written only after every file is flushed: a pack that
stops half-way leaves no dataset.json, and no reader takes it for a dataset.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import numpy as np

from .format import (HEADER, SHARD_NAME, FieldSpec, PackError, SampleError, header_json,
                     sharded_header_json, write_header)

_SHARD_RE = re.compile(r"shard-\d{5,}")


def _written_by_pack(entry: Path) -> bool:
    """Whether fulcrum-pack could have written this entry (so --force may remove it)."""
    name = entry.name
    if entry.is_file() and not entry.is_symlink():
        return name == HEADER or name.endswith(".npy") or name.startswith(".dataset.json.")
    if entry.is_dir() and not entry.is_symlink() and _SHARD_RE.fullmatch(name):
        return all(_written_by_pack(e) and e.is_file() for e in entry.iterdir())
    return False


def prepare_out_dir(out_dir: Path, force: bool) -> None:
    """Creates OUT, or empties a previous pack's output from it when `force` is set.

    --force removes only what fulcrum-pack writes (dataset.json first, so the old dataset
    stops looking complete at once, then .npy files and shard directories): a mistyped OUT
    that holds anything else is refused rather than wiped.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise PackError(f"{out_dir} exists and is not a directory; choose a new directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    entries = sorted(out_dir.iterdir())
    if not entries:
        return
    if not force:
        raise PackError(f"{out_dir} is not empty; choose a new or empty directory, or pass "
                        "--force (force=True) to replace the dataset in it")
    strays = [e.name for e in entries if not _written_by_pack(e)]
    if strays:
        raise PackError(f"{out_dir} holds {', '.join(strays[:5])}, which fulcrum-pack does not "
                        "write; --force only replaces a packed dataset, so choose another "
                        "directory")
    (out_dir / HEADER).unlink(missing_ok=True)
    for entry in entries:
        if entry.is_dir():
            shutil.rmtree(entry)
        elif entry.exists():
            entry.unlink()


class DatasetWriter:
    """Writes `samples` samples of `fields`, in order, into `out_dir`.

    With `shard_size`, samples go into subdirectories shard-00000, shard-00001, ... of
    `shard_size` samples each (the last may hold fewer), and the top-level dataset.json lists
    them. Call `write` with consecutive blocks of rows, then `finish`. `progress`, if given, is
    called with (samples written, total) after each write.
    """

    def __init__(self, out_dir: Path, fields: list[FieldSpec], samples: int, *,
                 shard_size: Optional[int] = None, meta: Optional[dict[str, Any]] = None,
                 force: bool = False,
                 progress: Optional[Callable[[int, int], None]] = None) -> None:
        if samples < 1:
            raise PackError("the dataset has no samples; the format needs at least one")
        if shard_size is not None and shard_size < 1:
            raise PackError(f"shard size must be at least 1, not {shard_size}")
        names = [f.name for f in fields]
        if not fields or len(set(names)) != len(names):
            raise PackError(f"fields must be a non-empty list of unique names, got {names}")
        prepare_out_dir(out_dir, force)
        self.out_dir = Path(out_dir)
        self.fields = list(fields)
        self.samples = samples
        self.shard_size = shard_size
        self.meta = dict(meta or {})
        self.written = 0
        self._progress = progress
        self._shards: list[str] = []
        self._part_start = 0
        self._part_end = 0
        self._part_dir: Optional[Path] = None
        self._maps: dict[str, np.memmap] = {}

    def _open_part(self) -> None:
        start = self._part_start = self.written
        if self.shard_size is None:
            self._part_dir, self._part_end = self.out_dir, self.samples
        else:
            name = SHARD_NAME.format(len(self._shards))
            self._part_dir = self.out_dir / name
            self._part_dir.mkdir()
            self._shards.append(name)
            self._part_end = min(start + self.shard_size, self.samples)
        count = self._part_end - start
        self._maps = {
            f.name: np.lib.format.open_memmap(self._part_dir / f.file, mode="w+",
                                              dtype=f.numpy_dtype, shape=(count,) + f.shape)
            for f in self.fields}

    def _close_part(self) -> None:
        assert self._part_dir is not None
        count = self._part_end - self._part_start
        for m in self._maps.values():
            m.flush()
        self._maps = {}
        write_header(self._part_dir, header_json(count, self.fields, self.meta))
        self._part_dir = None

    def write(self, rows: Mapping[str, np.ndarray]) -> None:
        """Appends a block of rows: rows[name] has shape [n] + field shape and its dtype."""
        n = None
        for f in self.fields:
            if f.name not in rows:
                raise PackError(f"field '{f.name}' is missing from the rows written")
            block = rows[f.name]
            if block.dtype != f.numpy_dtype or block.shape[1:] != f.shape:
                raise PackError(f"field '{f.name}': rows are {block.dtype} {list(block.shape)}, "
                                f"expected {f.numpy_dtype} [n] + {list(f.shape)}")
            if n is None:
                n = len(block)
            elif len(block) != n:
                raise PackError(f"field '{f.name}': {len(block)} rows, but the other fields "
                                f"have {n}")
        assert n is not None
        if self.written + n > self.samples:
            raise PackError(f"{self.written + n} samples written, but the dataset was declared "
                            f"with {self.samples}")
        self._check_classes(rows, n)
        done = 0
        while done < n:
            if self._part_dir is None:
                self._open_part()
            take = min(n - done, self._part_end - self.written)
            lo = self.written - self._part_start
            for f in self.fields:
                self._maps[f.name][lo:lo + take] = rows[f.name][done:done + take]
            done += take
            self.written += take
            if self.written == self._part_end:
                self._close_part()
        if self._progress is not None:
            self._progress(self.written, self.samples)

    def _check_classes(self, rows: Mapping[str, np.ndarray], n: int) -> None:
        """Refuses a label outside [0, classes), naming the first sample that has one."""
        for f in self.fields:
            if f.classes is None:
                continue
            block = rows[f.name].reshape(n, -1)
            bad = ((block < 0) | (block >= f.classes)).any(axis=1)
            if bad.any():
                row = int(np.argmax(bad))
                values = block[row]
                value = values[(values < 0) | (values >= f.classes)][0]
                raise SampleError(self.written + row, f.name,
                                  f"label {value} is outside [0, {f.classes}) (classes="
                                  f"{f.classes}); fix the label or raise classes")

    def finish(self) -> None:
        """Writes the top-level dataset.json, last, once every sample is on disk."""
        if self.written != self.samples:
            raise PackError(f"only {self.written} of {self.samples} samples were written")
        if self.shard_size is not None:
            write_header(self.out_dir, sharded_header_json(self._shards))
