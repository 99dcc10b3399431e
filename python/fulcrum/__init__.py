"""Fulcrum's Python tools.

- `fulcrum.pack` writes and reads the packed dataset format (docs/dataset-format.md) that
  fulcrum-trainer memory-maps.
- `fulcrum.init()` makes a user's own PyTorch DDP training loop a member of a Fulcrum job: per-rank
  batches from the coordinator's plan, exact weighted gradient aggregation, step reports
  (fulcrum/job.py has the whole picture).

The training runtime is imported on first use, so `fulcrum.pack` needs neither torch nor grpc.
"""

_RUNTIME = {
    "init": "fulcrum.job",
    "Job": "fulcrum.job",
    "StaticGroup": "fulcrum.job",
    "State": "fulcrum.state",
    "MembershipChanged": "fulcrum.errors",
    "CollectiveFailed": "fulcrum.errors",
    "FulcrumError": "fulcrum.errors",
    "NotUnderFulcrumError": "fulcrum.errors",
    "ConfigurationError": "fulcrum.errors",
    "CoordinatorRefusedError": "fulcrum.errors",
    "UsageError": "fulcrum.errors",
}

__all__ = sorted(_RUNTIME)


def __getattr__(name):
    module = _RUNTIME.get(name)
    if module is None:
        raise AttributeError(f"module 'fulcrum' has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(module), name)
