"""Reads a fulcrum-trainer checkpoint (docs/checkpoint-format.md) into a PyTorch state_dict.

    from fulcrum.checkpoint import load_checkpoint
    checkpoint = load_checkpoint("ckpt/checkpoint-000000001000.bin")
    model.load_state_dict(checkpoint.state_dict)      # parameters and buffers, by name
    checkpoint.step, checkpoint.cursor, checkpoint.optimizer["exp_avg"]["fc.weight"]

Needs NumPy; the tensors are torch tensors when torch is installed (as_numpy=True: arrays).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict

import numpy as np

MAGIC = b"FULCRUM-CKPT-2\n\0"
OLD_MAGIC = b"FULCRUM-CKPT-1\n\0"
ALIGNMENT = 64
# bfloat16 is read as its raw 16 bits and turned into torch.bfloat16 (NumPy has none).
DTYPES = {
    "float32": np.float32, "float64": np.float64, "float16": np.float16,
    "bfloat16": np.uint16, "int64": np.int64, "int32": np.int32, "int16": np.int16,
    "int8": np.int8, "uint8": np.uint8, "bool": np.bool_,
}


class CheckpointError(ValueError):
    """The file is not a readable format-2 checkpoint; the message says why."""


@dataclass
class Checkpoint:
    step: int  # optimizer steps completed
    cursor: int  # next global sample position
    state_dict: Dict[str, Any]  # parameters and buffers, by their state_dict names
    # optimizer state by slot, then parameter: {"exp_avg": {"fc.weight": ...}}; globals
    # (Adam's "step") directly: {"step": tensor}
    optimizer: Dict[str, Any] = field(default_factory=dict)
    meta: Dict[str, Any] = field(default_factory=dict)
    # samples weighted by their step's sample efficiency (docs/checkpoint-format.md); the
    # cursor for a file written before the field existed
    equivalent_samples: float = 0.0


def _fnv1a(data: bytes) -> int:
    # The checksum the trainer writes; NumPy keeps it fast enough for large files.
    value = 1469598103934665603
    prime = 1099511628211
    for byte in data:
        value = ((value ^ byte) * prime) & 0xFFFFFFFFFFFFFFFF
    return value


def load_checkpoint(path: str | Path, as_numpy: bool = False,
                    verify: bool = True) -> Checkpoint:
    """Reads `path`. verify=False skips the checksum (slow in pure Python for large files)."""
    data = Path(path).read_bytes()
    if data.startswith(OLD_MAGIC):
        raise CheckpointError(f"{path}: format 1 (written before tensors had names); "
                              "only the trainer image that wrote it can read it")
    if len(data) < 32 or not data.startswith(MAGIC):
        raise CheckpointError(f"{path}: not a Fulcrum checkpoint (no {MAGIC!r} magic)")
    if verify:
        (expected,) = struct.unpack_from("<Q", data, len(data) - 8)
        if _fnv1a(data[:-8]) != expected:
            raise CheckpointError(f"{path}: torn or corrupt (checksum mismatch)")
    (header_length,) = struct.unpack_from("<Q", data, len(MAGIC))
    header_start = len(MAGIC) + 8
    header = json.loads(data[header_start:header_start + header_length])
    if header.get("format") != "fulcrum.checkpoint" or header.get("version") != 2:
        raise CheckpointError(f"{path}: header of another format or version")
    data_start = -(-(header_start + header_length) // ALIGNMENT) * ALIGNMENT
    state_dict: Dict[str, Any] = {}
    optimizer: Dict[str, Any] = {}
    for entry in header["tensors"]:
        dtype = entry["dtype"]
        if dtype not in DTYPES:
            raise CheckpointError(f"{path}: tensor {entry['name']} has unknown dtype {dtype}")
        start = data_start + entry["offset"]
        array = np.frombuffer(data, dtype=DTYPES[dtype], count=int(np.prod(entry["shape"],
                                                                           dtype=np.int64)),
                              offset=start).reshape(entry["shape"]).copy()
        value: Any = array if as_numpy else _to_torch(array, dtype)
        if entry["group"] == "optimizer":
            slot, _, parameter = entry["name"].partition("/")
            if parameter:
                optimizer.setdefault(slot, {})[parameter] = value
            else:
                optimizer[slot] = value
        else:
            state_dict[entry["name"]] = value
    return Checkpoint(step=header["step"], cursor=header["cursor"], state_dict=state_dict,
                      optimizer=optimizer, meta=header.get("meta", {}),
                      equivalent_samples=float(header.get("equivalent_samples",
                                                          header["cursor"])))


def _to_torch(array: np.ndarray, dtype: str) -> Any:
    import torch  # only when asked for torch tensors

    tensor = torch.from_numpy(array)
    return tensor.view(torch.bfloat16) if dtype == "bfloat16" else tensor
