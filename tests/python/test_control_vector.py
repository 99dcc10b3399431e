"""The control vector that rides the last gradient bucket has fulcrum-trainer's layout
(ControlLayout in trainer_image/trainer/loop/training_loop.cc) and decodes exactly after a sum
in float32, as the all-reduce does it."""

from __future__ import annotations

import re

import numpy as np

from conftest import ROOT
from fulcrum import control


def summed_in_float32(*vectors):
    return np.sum([np.asarray(v, dtype=np.float32) for v in vectors], axis=0,
                  dtype=np.float32).tolist()


def test_the_layout_is_the_trainers():
    source = (ROOT / "trainer_image/trainer/loop/training_loop.cc").read_text()
    slots = dict(re.findall(r"static constexpr std::size_t k(\w+) = (\d+);", source))
    assert {name: int(value) for name, value in slots.items()} == {
        "Batch": control.BATCH, "LossSum": control.LOSS_SUM, "Leave": control.LEAVE,
        "Checkpoint": control.CHECKPOINT, "Accumulation": control.ACCUMULATION,
        "LearningRate": control.LEARNING_RATE, "TotalSteps": control.TOTAL_STEPS,
        "SampleEfficiency": control.SAMPLE_EFFICIENCY, "Plan": control.PLAN}


def test_sums_over_ranks_give_rank_zeros_plan_and_recipe():
    rank0 = control.Control(3, 3 * 1.25, plan=[4, 5, 7], accumulation_steps=2,
                            learning_rate=0.0123456789, total_steps=123_456_789,
                            sample_efficiency=0.6180339887).encode(3)
    rank1 = control.Control(5, 5 * 1.5, leave=True).encode(3)
    rank2 = control.Control(8, 8 * 1.0, checkpoint=True).encode(3)
    agreed = control.Agreed.decode(summed_in_float32(rank0, rank1, rank2), 3)
    assert agreed.global_batch == 16
    assert agreed.next_plan == [4, 5, 7]
    assert agreed.leave and agreed.checkpoint
    assert agreed.accumulation_steps == 2
    assert agreed.total_steps == 123_456_789
    assert abs(agreed.learning_rate - 0.0123456789) < 1e-14 * 0.0123456789 * 100
    assert abs(agreed.sample_efficiency - 0.6180339887) < 1e-12
    assert abs(agreed.global_loss - (3 * 1.25 + 5 * 1.5 + 8) / 16) < 1e-6


def test_nothing_to_leave_or_checkpoint_and_no_samples_means_no_loss():
    agreed = control.Agreed.decode(summed_in_float32(control.Control(0, 0.0, plan=[0]).encode(1)),
                                   1)
    assert not agreed.leave and not agreed.checkpoint
    assert agreed.global_batch == 0 and agreed.global_loss != agreed.global_loss  # NaN
