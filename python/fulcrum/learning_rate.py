"""The job's learning rate on a user's own optimizer (and scheduler).

A live edit of `training.learningRate`, or the rate an adaptive global batch scales
(docs/adaptive-batch.md), reaches every rank at the same step as `job.learning_rate`. The
optimizer and any scheduler are the script's own; `job.apply_learning_rate(optimizer,
scheduler)` puts the rate on them, once per change, so that:

- every parameter group is scaled by the same factor (new rate / the rate it replaces), so groups
  the script gave different rates (a backbone at a tenth of the head's) keep their ratios, and
  the first group runs at the job's rate;
- a scheduler keeps its schedule: its base rates (`base_lrs`, and each group's `initial_lr`) are
  scaled too, so the next `scheduler.step()` goes on from the new rate instead of overwriting it
  with the old one;
- a rank that joined later, whose optimizer came from a surviving rank's `fulcrum.State` (already
  at the job's rate), is scaled by 1: the factor is taken from the first group's rate, not from
  what this process applied before.
"""

from __future__ import annotations

from typing import Any, Optional

import torch


def reference_rate(optimizer: torch.optim.Optimizer, scheduler: Optional[Any] = None) -> float:
    """The rate the job's rate replaces: the scheduler's first base rate (what its schedule
    multiplies), else the optimizer's first group's rate."""
    base_lrs = getattr(scheduler, "base_lrs", None)
    if base_lrs:
        return float(base_lrs[0])
    return float(optimizer.param_groups[0]["lr"])


def scale_learning_rate(optimizer: torch.optim.Optimizer, scheduler: Optional[Any],
                        rate: float) -> float:
    """Scales every group of `optimizer` (and `scheduler`'s base rates) so that the reference rate
    becomes `rate`. Returns the factor applied (1.0 when it already is)."""
    if not rate > 0.0:
        raise ValueError(f"the learning rate must be positive, not {rate}")
    reference = reference_rate(optimizer, scheduler)
    if not reference > 0.0:
        raise ValueError(
            f"the optimizer's first learning rate is {reference}: a rate of 0 cannot be scaled to "
            f"the job's {rate}; give the optimizer a positive lr")
    factor = rate / reference
    if factor == 1.0:
        return factor
    for group in optimizer.param_groups:
        group["lr"] *= factor
        if "initial_lr" in group:
            group["initial_lr"] *= factor
    base_lrs = getattr(scheduler, "base_lrs", None)
    if base_lrs:
        scheduler.base_lrs = [base * factor for base in base_lrs]
    return factor
