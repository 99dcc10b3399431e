"""A Python job's own checkpoint: the registered fulcrum.State with the agreed step and sample
cursor, in the job's checkpoint.path (FULCRUM_CHECKPOINT_DIR), so a suspended, restarted or
rescheduled job resumes where it stopped, as fulcrum-trainer's jobs do.

One file, `fulcrum-state.pt`, written by rank 0 (the directory is the job's shared volume: the
operator's SharedStorage condition flags one that is not) to a temporary name, flushed to disk
and renamed over the last one: a reader sees the old checkpoint or the new, never half of one.
torch.save's format, so `torch.load(path)["state"]["model"]` is a plain state_dict."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from fulcrum.errors import ConfigurationError

FILE_NAME = "fulcrum-state.pt"
FORMAT = "fulcrum-python-state-1"


@dataclass
class SavedState:
    step: int     # optimizer steps completed
    cursor: int   # sample positions consumed
    state: dict   # fulcrum.State.state_dict()
    # Samples weighted by their step's sample efficiency (what epochs count under an adaptive
    # global batch); a checkpoint written before it existed trained at efficiency 1: its cursor.
    equivalent_samples: float = 0.0


def save(directory: str, state_dict: dict, step: int, cursor: int,
         equivalent_samples: float) -> Path:
    target = Path(directory) / FILE_NAME
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
        with open(temporary, "wb") as handle:
            torch.save({"format": FORMAT, "step": step, "cursor": cursor,
                        "equivalent_samples": equivalent_samples, "state": state_dict}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except OSError as error:
        raise ConfigurationError(
            f"cannot write the checkpoint {target} (checkpoint.path, FULCRUM_CHECKPOINT_DIR): "
            f"{error.strerror}; mount a writable shared volume there") from None
    return target


def load(directory: str) -> Optional[SavedState]:
    """The checkpoint in `directory`, or None when there is none yet (a new job)."""
    path = Path(directory) / FILE_NAME
    if not path.exists():
        return None
    try:
        saved = torch.load(path, map_location="cpu")
    except Exception as error:  # torch raises many kinds for a damaged file
        raise ConfigurationError(
            f"the checkpoint {path} cannot be read ({type(error).__name__}: {error}); delete it "
            "to start from step 0, or restore it from a backup") from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT or not all(
            key in saved for key in ("step", "cursor", "state")):
        raise ConfigurationError(
            f"{path} is not a fulcrum Python checkpoint (format {FORMAT}); is checkpoint.path "
            "shared with another job?")
    equivalent = saved.get("equivalent_samples", saved["cursor"])
    if not isinstance(equivalent, (int, float)) or not math.isfinite(equivalent) or equivalent < 0:
        raise ConfigurationError(
            f"{path} has equivalent_samples {equivalent!r}, which must be a finite number >= 0; "
            "delete it to start from step 0, or restore it from a backup")
    return SavedState(step=int(saved["step"]), cursor=int(saved["cursor"]), state=saved["state"],
                      equivalent_samples=float(equivalent))
