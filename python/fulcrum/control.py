"""The control vector: what the ranks must agree on after a step, all-reduced (summed) at the end
of the last gradient bucket, so that every rank acts on the same step without a second collective.
The layout and encodings are fulcrum-trainer's (ControlLayout in
trainer_image/trainer/loop/training_loop.cc): each rank writes its own values and zeros
elsewhere, and rank 0 alone writes its plan for the next step, so the sums are rank 0's plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

BATCH = 0          # this rank's samples: the sum is the step's global batch
LOSS_SUM = 1       # this rank's loss summed over its samples
LEAVE = 2          # > 0: some rank leaves this generation after the step
CHECKPOINT = 3     # > 0: some rank was asked for a checkpoint after the step
ACCUMULATION = 4   # rank 0: micro-steps per step of the next plan
LEARNING_RATE = 5  # rank 0: the live-edited learning rate, as two float32 (0: unchanged)
TOTAL_STEPS = 7    # rank 0: the live-edited total steps in units of 2^24, and the rest
SAMPLE_EFFICIENCY = 9  # rank 0: Assignment.sample_efficiency, as two float32 (0: unchanged)
PLAN = 11          # rank 0: world_size entries, every rank's batch for the next step

STEPS_UNIT = 16777216  # 2^24: float32 holds integers exactly below it


def size(world_size: int) -> int:
    return PLAN + world_size


def _float32(value: float) -> float:
    # Round through float32 the way a cast in C++ does; struct keeps this free of numpy/torch.
    import struct
    return struct.unpack("f", struct.pack("f", value))[0]


def encode_two_slots(value: float) -> tuple[float, float]:
    """A double as two float32 values whose sum is exact to about 48 bits."""
    high = _float32(value)
    return high, _float32(value - high)


@dataclass
class Control:
    """One rank's contribution to the control vector of a step."""
    local_batch: int
    loss_sum: float
    leave: bool = False
    checkpoint: bool = False
    # Only rank 0 fills these (its view of the plan for the next step).
    plan: Sequence[int] | None = None
    accumulation_steps: int = 1
    learning_rate: float = 0.0
    total_steps: int = 0
    sample_efficiency: float = 0.0

    def encode(self, world_size: int) -> list[float]:
        values = [0.0] * size(world_size)
        values[BATCH] = float(self.local_batch)
        values[LOSS_SUM] = float(self.loss_sum)
        values[LEAVE] = 1.0 if self.leave else 0.0
        values[CHECKPOINT] = 1.0 if self.checkpoint else 0.0
        if self.plan is not None:
            if len(self.plan) != world_size:
                raise ValueError(f"the plan has {len(self.plan)} batches for {world_size} ranks")
            values[ACCUMULATION] = float(max(1, self.accumulation_steps))
            values[LEARNING_RATE], values[LEARNING_RATE + 1] = encode_two_slots(self.learning_rate)
            values[TOTAL_STEPS] = float(self.total_steps // STEPS_UNIT)
            values[TOTAL_STEPS + 1] = float(self.total_steps % STEPS_UNIT)
            values[SAMPLE_EFFICIENCY], values[SAMPLE_EFFICIENCY + 1] = encode_two_slots(
                self.sample_efficiency)
            for rank, batch in enumerate(self.plan):
                values[PLAN + rank] = float(batch)
        return values


@dataclass
class Agreed:
    """The summed control vector of a step: the same on every rank."""
    global_batch: int
    loss_sum: float
    leave: bool
    checkpoint: bool
    next_plan: list[int]
    accumulation_steps: int
    learning_rate: float
    total_steps: int
    sample_efficiency: float

    @property
    def global_loss(self) -> float:
        if self.global_batch <= 0 or not math.isfinite(self.loss_sum):
            return math.nan
        return self.loss_sum / self.global_batch

    @classmethod
    def decode(cls, values: Sequence[float], world_size: int) -> "Agreed":
        if len(values) != size(world_size):
            raise ValueError(f"control vector has {len(values)} values, "
                             f"expected {size(world_size)}")
        return cls(global_batch=int(round(values[BATCH])),
                   loss_sum=float(values[LOSS_SUM]),
                   leave=values[LEAVE] > 0,
                   checkpoint=values[CHECKPOINT] > 0,
                   next_plan=[int(round(v)) for v in values[PLAN:PLAN + world_size]],
                   accumulation_steps=int(round(values[ACCUMULATION])),
                   learning_rate=float(values[LEARNING_RATE]) + float(values[LEARNING_RATE + 1]),
                   total_steps=int(round(values[TOTAL_STEPS])) * STEPS_UNIT
                   + int(round(values[TOTAL_STEPS + 1])),
                   sample_efficiency=float(values[SAMPLE_EFFICIENCY])
                   + float(values[SAMPLE_EFFICIENCY + 1]))
