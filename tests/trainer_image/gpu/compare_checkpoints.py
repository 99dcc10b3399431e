#!/usr/bin/env python3
"""Compares two fulcrum-trainer checkpoints of a float32 model (parameters, buffers and
optimizer state) element by element: exit 0 when max |a - b| <= TOLERANCE.

    compare_checkpoints.py A.bin B.bin TOLERANCE
Layout (trainer_image/trainer/state/training_state.cc): 16-byte magic, uint64 length, then `length`
bytes of state (int64 step, int64 cursor, the tensors' bytes), then a uint64 FNV-1a hash.
"""
import array
import sys

MAGIC, LENGTH, PROGRESS = 16, 8, 16


def floats(path):
    with open(path, "rb") as f:
        data = f.read()
    length = int.from_bytes(data[MAGIC:MAGIC + LENGTH], "little")
    state = data[MAGIC + LENGTH:MAGIC + LENGTH + length]
    values = array.array("f")
    values.frombytes(state[PROGRESS:])
    return state[:PROGRESS], values


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    (header_a, a), (header_b, b) = floats(sys.argv[1]), floats(sys.argv[2])
    tolerance = float(sys.argv[3])
    if header_a != header_b or len(a) != len(b):
        sys.exit("checkpoints differ in step, cursor or size: not the same training")
    worst = max(abs(x - y) for x, y in zip(a, b))
    print(f"max |difference| = {worst:.3g} over {len(a)} values (tolerance {tolerance:g})")
    sys.exit(0 if worst <= tolerance else 1)


if __name__ == "__main__":
    main()
