"""What must survive a membership change: the user registers it, and when the job re-forms
(a peer lost, a newcomer joined) the rank with the most advanced state sends it to every other
rank, so all resume at the same step with the same model, optimizer, scheduler and extras.
In the spirit of Horovod's elastic TorchState, with Fulcrum's rule for the source: the highest
step wins (a newcomer at step 0 catches up; the step never goes back)."""

from __future__ import annotations

import copy
from typing import Any, Optional

import torch

from fulcrum.errors import UsageError


class State:
    """fulcrum.State(model=module, optimizer=optimizer, scheduler=None, extra={...}).

    `model` is the plain module (not the DistributedDataParallel job.distributed() returns:
    that one is rebuilt around the module in every generation); `extra` is a dict of anything
    picklable the loop keeps (epoch counters, best metric, RNG state...)."""

    def __init__(self, model: Optional[torch.nn.Module] = None,
                 optimizer: Optional[torch.optim.Optimizer] = None, scheduler: Any = None,
                 extra: Optional[dict] = None):
        if not isinstance(model, torch.nn.Module):
            raise UsageError("fulcrum.State(model=...): give the model (a torch.nn.Module) whose "
                             f"parameters are trained; got {type(model).__name__}")
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            raise UsageError("fulcrum.State(model=...): give the plain module, not the "
                             "DistributedDataParallel wrapper (job.distributed() rebuilds that "
                             "around the module in every generation)")
        if optimizer is None:
            raise UsageError(
                "fulcrum.State(optimizer=...) is missing: the optimizer's state (momentum, Adam's "
                "moments, its step count) must move with the model when members join, or the "
                "ranks would update differently. Pass the optimizer that trains this model")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise UsageError("fulcrum.State(optimizer=...): expected a torch.optim.Optimizer, got "
                             f"{type(optimizer).__name__}")
        trained = {id(p) for p in model.parameters()}
        foreign = [p for group in optimizer.param_groups for p in group["params"]
                   if id(p) not in trained]
        if foreign:
            raise UsageError(
                f"fulcrum.State: the optimizer holds {len(foreign)} parameter(s) that are not "
                "the model's; build it on model.parameters() of the module given as model=")
        if scheduler is not None and not hasattr(scheduler, "state_dict"):
            raise UsageError("fulcrum.State(scheduler=...): the scheduler has no state_dict()")
        if extra is not None and not isinstance(extra, dict):
            raise UsageError("fulcrum.State(extra=...): expected a dict, got "
                             f"{type(extra).__name__}")
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.extra = extra if extra is not None else {}

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
                "extra": copy.deepcopy(self.extra)}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state["scheduler"] is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        self.extra.clear()
        self.extra.update(state["extra"])
