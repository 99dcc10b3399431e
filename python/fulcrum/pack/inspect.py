"""A summary of a packed dataset: what `fulcrum-pack --inspect DIR` prints, as data.

It validates the directory first (the same checks as the trainer's), so a dataset that
inspects cleanly is one the trainer accepts, and summarises labels (integer scalar fields),
the usual thing to check before training: their range and, with classes, the histogram.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Union

import numpy as np

from .format import INTEGER_DTYPES, read_layout

_LABEL_BLOCK = 1 << 22  # labels counted in blocks, so a huge label file is not read at once


def disk_size(path: Path) -> int:
    """Bytes of every file under path (what the dataset costs to copy)."""
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def _label_summary(parts: list[np.ndarray], classes: Union[int, None]) -> dict[str, Any]:
    low, high = None, None
    counts = np.zeros(classes, dtype=np.int64) if classes else None
    for part in parts:
        for start in range(0, len(part), _LABEL_BLOCK):
            block = np.asarray(part[start:start + _LABEL_BLOCK]).astype(np.int64)
            low = int(block.min()) if low is None else min(low, int(block.min()))
            high = int(block.max()) if high is None else max(high, int(block.max()))
            if counts is not None:
                inside = block[(block >= 0) & (block < classes)]
                counts += np.bincount(inside, minlength=classes)
    summary: dict[str, Any] = {"min": low, "max": high}
    if counts is not None:
        summary["histogram"] = counts.tolist()
    return summary


def inspect(path: Union[str, Path]) -> dict[str, Any]:
    """Describes a packed dataset: samples, shards, fields (with bytes each), disk size, meta,
    and a min/max (plus a class histogram where classes is set) of each label field."""
    layout = read_layout(Path(path))
    fields = []
    labels = {}
    for spec in layout.fields:
        files = [part.file(spec) for part in layout.parts]
        fields.append({**spec.to_json(), "bytes": sum(os.path.getsize(f) for f in files)})
        if spec.dtype in INTEGER_DTYPES and spec.shape == ():
            parts = [np.load(f, mmap_mode="r") for f in files]
            labels[spec.name] = _label_summary(parts, spec.classes)
    return {
        "path": str(layout.path),
        "samples": layout.samples,
        "shards": [p.path.name for p in layout.parts] if layout.sharded else [],
        "fields": fields,
        "disk_bytes": disk_size(layout.path),
        "labels": labels,
        "meta": layout.meta,
    }
