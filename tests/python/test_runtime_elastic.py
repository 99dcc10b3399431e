"""Elastic membership of a Python job without restarting anyone: kill -9 one of four trainers and
the other three continue in the next generation, the step never going back; a newcomer then
joins and starts from the same state; across both, every sample of an epoch is trained exactly
once (the committed steps tile the sample stream) and every rank holds the same parameters."""

from __future__ import annotations

import json
import signal

import pytest
import torch

import runtime_worker as worker
from coordinator_harness import LocalCoordinator, wait_until
from fulcrum.sample_order import SampleOrder

pytestmark = pytest.mark.integration
STEPS = 600  # 16 samples a step over 1,000 samples: 9 epochs and a part


def records(tmp_path, pod: str) -> list[dict]:
    path = tmp_path / f"{pod}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def last(tmp_path, pod: str, field: str, default=-1):
    found = records(tmp_path, pod)
    return found[-1][field] if found else default


def test_a_killed_trainer_and_a_newcomer_reform_the_job_in_place(tmp_path):
    coordinator = LocalCoordinator(tmp_path, "--global-batch", "16", "--min-workers", "4",
                                   "--settle-ms", "200")

    def start(pod: str):
        return coordinator.start_worker(
            pod, "--out", str(tmp_path / f"{pod}.pt"), "--steps", str(STEPS), "--samples",
            "1000", "--hidden", "64", env=coordinator.environment(
                pod, FULCRUM_SAMPLE_LOG=str(tmp_path / f"{pod}.jsonl"),
                FULCRUM_SLOWDOWN_FILE=str(slowdown)))

    # EMULATION: slow steps while members leave and join, so the job outlives the changes;
    # full speed once the newcomer trains.
    slowdown = tmp_path / "slowdown"
    slowdown.write_text("40\n")
    try:
        for pod in "abcd":
            start(pod)
        wait_until(lambda: last(tmp_path, "d", "step") >= 30, 180, "30 steps of d")
        coordinator.workers["d"].send_signal(signal.SIGKILL)
        killed_at = last(tmp_path, "a", "step")
        wait_until(lambda: last(tmp_path, "a", "generation", 0) >= 2
                   and last(tmp_path, "a", "step") >= killed_at + 20, 120,
                   "a to go on in a new generation without d")
        start("e")
        wait_until(lambda: last(tmp_path, "e", "step") >= 0, 120, "the newcomer's first step")
        slowdown.write_text("1\n")
        codes = coordinator.wait_for_workers(timeout=300)
    finally:
        coordinator.stop()
    assert codes["d"] == -signal.SIGKILL
    assert {pod: code for pod, code in codes.items() if pod != "d"} == dict.fromkeys("abce", 0), {
        pod: coordinator.worker_log(pod)[-3000:] for pod in "abce"}

    by_step: dict[int, list[dict]] = {}
    for pod in "abcde":
        lines = records(tmp_path, pod)
        steps = [line["step"] for line in lines]
        assert steps == sorted(set(steps)), f"{pod}'s step went back or repeated"
        assert len({line["pid"] for line in lines}) == 1, f"{pod} restarted"
        for line in lines:
            by_step.setdefault(line["step"], []).append(dict(line, pod=pod))
    generations_of_a = [line["generation"] for line in records(tmp_path, "a")]
    assert len(set(generations_of_a)) >= 3, set(generations_of_a)  # 4 ranks, 3, then 4 again
    assert records(tmp_path, "e")[0]["step"] > killed_at + 20  # joined late, not at step 0

    # The committed steps tile the sample stream: no position trained twice or skipped.
    assert sorted(by_step) == list(range(STEPS))
    cursor = 0
    for step in range(STEPS):
        lines = by_step[step]
        assert len({(l["generation"], tuple(l["batches"]), l["cursor"], l["global_batch"])
                    for l in lines}) == 1, f"step {step}: ranks disagree: {lines}"
        assert lines[0]["cursor"] == cursor, step
        assert len({l["checksum"] for l in lines}) == 1, f"step {step}: parameters differ"
        world = len(lines[0]["batches"])
        if len(lines) == world:  # every rank logged it: their shards tile the step
            shards = sorted(tuple(l["positions"]) for l in lines)
            assert shards[0][0] == cursor and shards[-1][1] == cursor + lines[0]["global_batch"]
            assert all(x[1] == y[0] for x, y in zip(shards, shards[1:]))
        cursor += lines[0]["global_batch"]
    assert cursor == 16 * STEPS

    # The epochs completed in full hold each sample exactly once. A step's shard can be missing
    # from the logs (d was killed after its last step committed everywhere, before it logged
    # it): its positions come from the step's range and the job's order.
    order = SampleOrder(1000, seed=worker.SEED)
    trained: dict[int, list[int]] = {}
    for step in range(STEPS):
        lines = by_step[step]
        logged = set()
        for line in lines:
            begin, end = line["positions"]
            assert line["indices"] == order.indices(range(begin, end)), (step, line["pod"])
            logged.update(range(begin, end))
        start = lines[0]["cursor"]
        for position in range(start, start + lines[0]["global_batch"]):
            trained.setdefault(position // 1000, []).extend(
                order.indices(range(position, position + 1)))
        assert logged <= set(range(start, start + lines[0]["global_batch"])), step
    for epoch in range(cursor // 1000):
        assert sorted(trained[epoch]) == list(range(1000)), f"epoch {epoch}"

    results = {pod: torch.load(tmp_path / f"{pod}.pt") for pod in "abce"}
    for pod, result in results.items():
        assert result["step"] == STEPS, pod
        for mine, theirs in zip(result["parameters"], results["a"]["parameters"]):
            assert torch.equal(mine, theirs), pod
