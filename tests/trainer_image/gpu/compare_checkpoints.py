#!/usr/bin/env python3
"""Compares two fulcrum-trainer checkpoints (parameters, buffers and optimizer state) tensor by
tensor, by name: exit 0 when they hold the same step, cursor and tensors and max |a - b| <=
TOLERANCE over every value.

    compare_checkpoints.py A.bin B.bin TOLERANCE
Reads them with the fulcrum Python package's reader (python/fulcrum/checkpoint.py, format 2).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "python"))
from fulcrum.checkpoint import load_checkpoint  # noqa: E402


def tensors(checkpoint):
    """Every tensor by a name unique across groups."""
    named = {f"state_dict/{name}": value for name, value in checkpoint.state_dict.items()}
    for slot, values in checkpoint.optimizer.items():
        if isinstance(values, dict):
            named.update({f"optimizer/{slot}/{name}": v for name, v in values.items()})
        else:
            named[f"optimizer/{slot}"] = values
    return named


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    a, b = (load_checkpoint(path, as_numpy=True) for path in sys.argv[1:3])
    tolerance = float(sys.argv[3])
    if (a.step, a.cursor) != (b.step, b.cursor):
        sys.exit(f"not the same training: step/cursor {a.step}/{a.cursor} and {b.step}/{b.cursor}")
    named_a, named_b = tensors(a), tensors(b)
    if named_a.keys() != named_b.keys():
        sys.exit(f"not the same tensors: {sorted(named_a.keys() ^ named_b.keys())}")
    worst, values = 0.0, 0
    for name, value in named_a.items():
        other = named_b[name]
        if value.shape != other.shape:
            sys.exit(f"{name}: shape {value.shape} against {other.shape}")
        if value.size:
            difference = np.abs(value.astype(np.float64) - other.astype(np.float64)).max()
            worst = max(worst, float(difference))
        values += value.size
    print(f"max |difference| = {worst:.3g} over {values} values in {len(named_a)} tensors "
          f"(tolerance {tolerance:g})")
    sys.exit(0 if worst <= tolerance else 1)


if __name__ == "__main__":
    main()
