"""An adaptive global batch (docs/adaptive-batch.md) through the real coordinator: the ranks'
gradient statistics give it a noise scale, it moves B (here from 16, below the job's bounds,
into [24, 48] at once) with the learning rate scaled to match, every rank switches both at the
same step, and the training stays exactly that of one process replaying the same sequence of
global batches and learning rates."""

from __future__ import annotations

import json

import pytest
import torch

import runtime_worker as worker
from coordinator_harness import LocalCoordinator
from fulcrum.sample_order import SampleOrder

pytestmark = pytest.mark.integration
STEPS = 120  # plans are announced 0.3 s ahead; these steps take milliseconds
TOLERANCE = 1e-5


def run_adaptive_job(tmp_path, *worker_arguments: str):
    """Three logged workers with `worker_arguments` under a coordinator whose B starts at 16,
    below the adaptive bounds [24, 48], so it moves at once: their exit codes, the coordinator's
    final state and the (stopped) coordinator."""
    coordinator = LocalCoordinator(
        tmp_path, "--global-batch", "16", "--min-workers", "3", "--learning-rate", "0.1",
        "--adaptive-batch-min", "24", "--adaptive-batch-max", "48",
        "--adaptive-batch-dwell-steps", "5", "--interval-steps", "5")
    try:
        codes = coordinator.run_logged_workers([f"worker-{i}" for i in range(3)],
                                               *worker_arguments)
        state = coordinator.state()
    finally:
        coordinator.stop()
    return codes, state, coordinator


def test_the_global_batch_and_its_learning_rate_change_together_and_training_stays_exact(
        tmp_path):
    codes, state, coordinator = run_adaptive_job(tmp_path, "--steps", str(STEPS))
    assert set(codes.values()) == {0}, {pod: coordinator.worker_log(pod)[-2000:] for pod in codes}

    by_step: dict[int, list[dict]] = {}
    for index in range(3):
        for line in (tmp_path / f"worker-{index}.jsonl").read_text().splitlines():
            record = json.loads(line)
            by_step.setdefault(record["step"], []).append(record)
    assert sorted(by_step) == list(range(STEPS))
    schedule = []  # (cursor, global batch, learning rate) per step, as every rank saw it
    for step in range(STEPS):
        seen = {(r["cursor"], r["global_batch"], r["learning_rate"]) for r in by_step[step]}
        assert len(seen) == 1, f"step {step}: ranks disagree: {seen}"
        schedule.append(seen.pop())
    batches = [batch for _, batch, _ in schedule]
    assert batches[0] == 16 and 24 <= batches[-1] <= 48, batches
    # The estimate behind each change is in status with it. The live one can be momentarily
    # absent (0) at the end: the fit of |g|² against 1/B has no positive intercept while the
    # gradients shrink (a run on this machine read 0.0 after a change made at noise scale 33).
    assert state["batching_mode"] == "adaptive" and state["gradient_noise_scale"] >= 0
    changes = state["global_batch_changes"]
    assert changes[0]["from"] == 16 and "outside [24, 48]" in changes[0]["reason"]
    assert all(change["noise_scale"] > 0 for change in changes), changes
    assert all(24 <= change["to"] <= 48 for change in changes)
    # The trainers ran the coordinator's batches in its order (one decided near the end may
    # not have come into force before the last step), each with its learning rate.
    ran = [batch for step, batch in enumerate(batches) if step == 0 or batch != batches[step - 1]]
    assert len(ran) >= 2 and ran == ([16] + [c["to"] for c in changes])[:len(ran)], (ran, changes)
    rates = [rate for _, _, rate in schedule]
    assert rates[0] == pytest.approx(0.1)
    assert rates[-1] == pytest.approx(changes[len(ran) - 2]["learning_rate"])
    assert rates[-1] > 0.1, "a larger batch takes a larger step (AdaScale's gain)"

    # One process replays the same global batches and learning rates.
    dataset = worker.make_dataset()
    order = SampleOrder(len(dataset), seed=worker.SEED)
    model = worker.make_model()
    optimizer = worker.make_optimizer("sgd", model.parameters())
    for cursor, batch, rate in schedule:
        for group in optimizer.param_groups:
            group["lr"] = rate
        inputs, labels = dataset[order.indices(range(cursor, cursor + batch))]
        torch.nn.functional.cross_entropy(model(inputs), labels).backward()
        optimizer.step()
        optimizer.zero_grad()
    for index in range(3):
        result = torch.load(tmp_path / f"worker-{index}.pt")
        for mine, reference in zip(result["parameters"], model.parameters()):
            assert (mine - reference.detach()).abs().max().item() < TOLERANCE, index


def test_an_epoch_loader_trains_until_its_equivalent_samples_cover_the_epochs(tmp_path):
    """epochs= counts each sample at its step's sample efficiency, as fulcrum-trainer does: above
    B0 = 16 a sample is worth less, so the loader trains past its epochs' samples and stops at
    the first step whose weighted sum covers them, on every rank at once."""
    samples, epochs = 600, 2
    codes, state, coordinator = run_adaptive_job(tmp_path, "--epochs", str(epochs), "--samples",
                                                 str(samples))
    assert set(codes.values()) == {0}, {pod: coordinator.worker_log(pod)[-2000:] for pod in codes}
    sent = [1.0] + [change["sample_efficiency"] for change in state["global_batch_changes"]]
    by_step: dict[int, set] = {}
    for index in range(3):
        for line in (tmp_path / f"worker-{index}.jsonl").read_text().splitlines():
            record = json.loads(line)
            by_step.setdefault(record["step"], set()).add(
                (record["global_batch"], record["sample_efficiency"]))
    equivalent, trained, covered_at = 0.0, 0, None
    for step in sorted(by_step):
        assert len(by_step[step]) == 1, f"step {step}: ranks disagree: {by_step[step]}"
        batch, efficiency = next(iter(by_step[step]))
        assert any(abs(efficiency - value) < 1e-9 for value in sent), (step, efficiency, sent)
        equivalent += batch * efficiency
        trained += batch
        if covered_at is None and equivalent >= epochs * samples - 0.5:
            covered_at = step
    assert covered_at == max(by_step), (covered_at, max(by_step))
    assert min(e for _, e in set().union(*by_step.values())) < 1.0
    assert trained > epochs * samples, "it trained on past the epochs' samples"
