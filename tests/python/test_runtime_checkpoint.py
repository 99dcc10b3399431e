"""A Python job checkpoints and resumes by itself: stopped mid-run (SIGTERM, as Kubernetes stops
a suspended job's pods), rank 0 leaves its State, step and cursor in the job's checkpoint
directory (FULCRUM_CHECKPOINT_DIR); new processes resume there, at that step, and end with the
parameters of a run that was never interrupted. A damaged checkpoint is refused by name."""

from __future__ import annotations

import json
import signal

import pytest
import torch

import fulcrum
from coordinator_harness import LocalCoordinator, wait_until
from fulcrum import state_checkpoint

pytestmark = pytest.mark.integration
STEPS = 60
TOLERANCE = 1e-5


def run_pair(coordinator, tmp_path, pods, **environment):
    for pod in pods:
        coordinator.start_worker(pod, "--out", str(tmp_path / f"{pod}.pt"), "--steps", str(STEPS),
                                 env=coordinator.environment(
                                     pod, FULCRUM_SAMPLE_LOG=str(tmp_path / f"{pod}.jsonl"),
                                     **environment))


def steps_of(tmp_path, pod: str) -> list[int]:
    path = tmp_path / f"{pod}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["step"] for line in path.read_text().splitlines()
            if line.endswith("}")]


def test_a_stopped_job_resumes_from_its_checkpoint_with_an_uninterrupted_runs_parameters(
        tmp_path):
    straight = tmp_path / "straight"
    straight.mkdir()
    coordinator = LocalCoordinator(straight, "--global-batch", "16", "--min-workers", "2")
    try:
        run_pair(coordinator, straight, "ab")
        assert coordinator.wait_for_workers(timeout=240) == {"a": 0, "b": 0}
    finally:
        coordinator.stop()
    expected = torch.load(straight / "a.pt")["parameters"]

    checkpoints = tmp_path / "checkpoints"
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    slowdown = stopped / "slowdown"
    slowdown.write_text("30\n")  # EMULATION: slow enough to stop it mid-run
    coordinator = LocalCoordinator(stopped, "--global-batch", "16", "--min-workers", "2")
    try:
        run_pair(coordinator, stopped, "ab", FULCRUM_CHECKPOINT_DIR=str(checkpoints),
                 FULCRUM_SLOWDOWN_FILE=str(slowdown))
        wait_until(lambda: len(steps_of(stopped, "a")) >= 15, 180, "15 steps")
        for process in coordinator.workers.values():
            process.send_signal(signal.SIGTERM)
        assert coordinator.wait_for_workers(timeout=120) == {"a": 0, "b": 0}
        saved = state_checkpoint.load(str(checkpoints))
        assert saved is not None, coordinator.worker_log("a")[-3000:]
        assert 15 <= saved.step < STEPS and saved.cursor == 16 * saved.step
        assert saved.step == steps_of(stopped, "a")[-1] + 1  # the last step every rank finished
        assert "checkpoint saved at step" in coordinator.worker_log("a") + \
            coordinator.worker_log("b")

        slowdown.write_text("1\n")
        run_pair(coordinator, stopped, "cd", FULCRUM_CHECKPOINT_DIR=str(checkpoints))
        assert coordinator.wait_for_workers(timeout=240) == dict.fromkeys("abcd", 0)
    finally:
        coordinator.stop()
    assert steps_of(stopped, "c")[0] == saved.step, "resumed at the checkpoint's step"
    assert f"resumed from checkpoint {checkpoints}" in coordinator.worker_log("c")
    resumed = torch.load(stopped / "c.pt")
    assert resumed["step"] == STEPS
    for mine, reference in zip(resumed["parameters"], expected):
        assert (mine - reference).abs().max().item() < TOLERANCE


def test_a_damaged_checkpoint_is_refused_naming_the_file_and_the_fix(tmp_path):
    (tmp_path / state_checkpoint.FILE_NAME).write_bytes(b"not a checkpoint")
    with pytest.raises(fulcrum.ConfigurationError) as refused:
        state_checkpoint.load(str(tmp_path))
    assert str(tmp_path / state_checkpoint.FILE_NAME) in str(refused.value)
    assert "delete it to start from step 0" in str(refused.value)
    torch.save({"model": {}}, tmp_path / state_checkpoint.FILE_NAME)
    with pytest.raises(fulcrum.ConfigurationError, match="not a fulcrum Python checkpoint"):
        state_checkpoint.load(str(tmp_path))
    assert state_checkpoint.load(str(tmp_path / "empty")) is None
