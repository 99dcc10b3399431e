"""job.apply_learning_rate (fulcrum/learning_rate.py): the job's rate on a script's own optimizer
and scheduler, keeping group ratios and the schedule."""

from __future__ import annotations

import pytest
import torch

from fulcrum.learning_rate import scale_learning_rate


def two_groups(head_lr=0.1, backbone_lr=0.01):
    head, backbone = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    return torch.optim.SGD([{"params": head.parameters(), "lr": head_lr},
                            {"params": backbone.parameters(), "lr": backbone_lr}],
                           momentum=0.9)


def rates(optimizer):
    return [group["lr"] for group in optimizer.param_groups]


def test_the_first_group_takes_the_jobs_rate_and_the_others_keep_their_ratio():
    optimizer = two_groups()
    assert scale_learning_rate(optimizer, None, 0.4) == pytest.approx(4.0)
    assert rates(optimizer) == pytest.approx([0.4, 0.04])


def test_applying_the_same_rate_again_changes_nothing():
    optimizer = two_groups()
    scale_learning_rate(optimizer, None, 0.4)
    assert scale_learning_rate(optimizer, None, 0.4) == 1.0
    assert rates(optimizer) == pytest.approx([0.4, 0.04])


def test_a_scheduler_goes_on_from_the_new_rate_instead_of_overwriting_it():
    optimizer = two_groups()
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    for _ in range(2):  # one decay: 0.1 -> 0.05
        optimizer.step()
        scheduler.step()
    assert rates(optimizer) == pytest.approx([0.05, 0.005])
    scale_learning_rate(optimizer, scheduler, 0.2)  # the job's base rate doubles
    assert rates(optimizer) == pytest.approx([0.1, 0.01])
    assert scheduler.base_lrs == pytest.approx([0.2, 0.02])
    for _ in range(2):  # the next decay halves the new rate
        optimizer.step()
        scheduler.step()
    assert rates(optimizer) == pytest.approx([0.05, 0.005])


def test_a_lambda_schedule_multiplies_the_new_base_rate():
    optimizer = two_groups()
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1 + step))
    scale_learning_rate(optimizer, scheduler, 0.3)
    optimizer.step()
    scheduler.step()
    assert rates(optimizer) == pytest.approx([0.15, 0.015])


def test_an_optimizer_restored_at_the_jobs_rate_is_left_as_it_is():
    # A rank that joined later holds a surviving rank's optimizer state, already scaled.
    optimizer = two_groups(head_lr=0.4, backbone_lr=0.04)
    assert scale_learning_rate(optimizer, None, 0.4) == 1.0
    assert rates(optimizer) == pytest.approx([0.4, 0.04])


def test_a_zero_or_negative_rate_is_refused_naming_what_to_fix():
    with pytest.raises(ValueError, match="must be positive"):
        scale_learning_rate(two_groups(), None, 0.0)
    with pytest.raises(ValueError, match="give the optimizer a positive lr"):
        scale_learning_rate(two_groups(head_lr=0.0), None, 0.1)
