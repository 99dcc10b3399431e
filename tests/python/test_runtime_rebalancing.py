"""Live rebalancing of a Python job: one of three ranks made 6x slower (EMULATED: its compute is
followed by a sleep, tests only) sheds at least half its local batch within 20 steps, through the
real coordinator's balancer, with no process restarted and every rank holding the same
parameters at every step."""

from __future__ import annotations

import json
import signal

import pytest
import torch

from coordinator_harness import LocalCoordinator, wait_until

pytestmark = pytest.mark.integration
WITHIN_STEPS = 20


def records(tmp_path, pod: str) -> list[dict]:
    path = tmp_path / f"{pod}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def last_step(tmp_path, pod: str) -> int:
    found = records(tmp_path, pod)
    return found[-1]["step"] if found else -1


# Before the slowdown, the slowed rank holds at least this many of the global batch's 96: on
# this machine's shared cores a rank's first steps can look slow, and the balancer may put it
# at a few samples until its landing measures its speed (a run once slowed a rank at batch 2,
# which had nothing left to shed). Not an equal share: three processes on two cores are not
# equally fast (one run held 23, 15 and 58 for 2,000 steps, each rank's time per sample
# measured to match).
HELD_BEFORE = 8


def moved_off(line: dict, before: int) -> bool:
    """The rank shed at least half of its batch `before`. A 6x slowdown among equals takes its
    optimum to about a sixth; "below every other rank" was asked once, and failed when an
    unslowed rank sat at a few samples from its own noisy start (16 against 8)."""
    return 2 * line["batches"][line["rank"]] <= before


def held_batch(tmp_path, pod: str) -> int:
    found = records(tmp_path, pod)
    return found[-1]["batches"][found[-1]["rank"]] if found else 0


def why_not_sooner(coordinator: LocalCoordinator, since_step: int) -> str:
    """What a slow answer is read from: c's emulation log lines and the coordinator's plans
    from `since_step` on, with their reasons."""
    emulation = [line for line in coordinator.worker_log("c").splitlines() if "EMULATION" in line]
    plans = []
    for line in coordinator.log.read_text().splitlines():
        if '"new batches"' in line:
            plan = json.loads(line)
            if plan.get("apply_at_step", 0) >= since_step:
                plans.append(f"{plan['apply_at_step']} {plan['batches']} {plan['reason'][:300]}")
    return "\n".join(["c's emulation:", *emulation, "plans:", *plans])


def test_a_slowed_rank_gets_a_smaller_batch_within_20_steps_without_restarts(tmp_path):
    # Every rank slowed 4x from the start (EMULATED), c then 24x: the step is mostly the emulated
    # sleep, as on a GPU it is mostly compute, and sleeping ranks do not compete for this
    # machine's cores. The time a rank waits for a core adds to every rank's step alike
    # (EmulatedSlowdown.sleep_seconds multiplies only the CPU time), so the larger the factors,
    # the less a loaded machine shrinks c's measured 6x.
    coordinator = LocalCoordinator(tmp_path, "--global-batch", "96", "--min-workers", "3",
                                   "--max-workers", "3", "--settle-ms", "200")
    for pod in "abc":
        (tmp_path / f"{pod}-slowdown").write_text("4\n")
    slowdown = tmp_path / "c-slowdown"
    try:
        for pod in "abc":
            coordinator.start_worker(
                pod, "--out", str(tmp_path / f"{pod}.pt"), "--steps", "100000", "--samples",
                "4096", "--features", "1024", "--hidden", "2048",
                env=coordinator.environment(
                    pod, FULCRUM_SAMPLE_LOG=str(tmp_path / f"{pod}.jsonl"),
                    FULCRUM_SLOWDOWN_FILE=str(tmp_path / f"{pod}-slowdown")))
        wait_until(lambda: min(last_step(tmp_path, pod) for pod in "abc") >= 30
                   and held_batch(tmp_path, "c") >= HELD_BEFORE, 240,
                   f"30 steps on every rank and at least {HELD_BEFORE} samples on c")
        last = records(tmp_path, "c")[-1]
        slowed_at = last["step"] + 1  # the first step that can read the new factor
        before = last["batches"][last["rank"]]
        slowdown.write_text("24\n")
        wait_until(lambda: any(line["step"] >= slowed_at and moved_off(line, before)
                               for line in records(tmp_path, "c"))
                   or last_step(tmp_path, "c") >= slowed_at + 3 * WITHIN_STEPS, 300,
                   "a smaller batch for c, or 60 slowed steps")
        for process in coordinator.workers.values():
            process.send_signal(signal.SIGTERM)  # every rank leaves after the same step
        codes = coordinator.wait_for_workers(timeout=120)
    finally:
        coordinator.stop()
    assert codes == dict.fromkeys("abc", 0), {pod: coordinator.worker_log(pod)[-3000:]
                                              for pod in "abc"}
    logs = {pod: records(tmp_path, pod) for pod in "abc"}
    smaller = [line["step"] for line in logs["c"]
               if line["step"] >= slowed_at and moved_off(line, before)]
    assert smaller, (f"c held {before} before; last batches "
                     f"{[line['batches'] for line in logs['c'][-5:]]}\n"
                     + why_not_sooner(coordinator, slowed_at))
    print(f"slowed at step {slowed_at}; c smaller from step {smaller[0]}: {logs['c'][-1]['batches']}")
    assert smaller[0] <= slowed_at + WITHIN_STEPS, (
        f"slowed at {slowed_at}, c held {before}, half of it first at {smaller[0]}\n"
        + why_not_sooner(coordinator, slowed_at))
    for pod, lines in logs.items():
        assert len({line["pid"] for line in lines}) == 1, f"{pod} restarted"
        assert {line["generation"] for line in lines} == {lines[0]["generation"]}, pod
    checksums: dict[int, set[float]] = {}
    for lines in logs.values():
        for line in lines:
            checksums.setdefault(line["step"], set()).add(line["checksum"])
    assert all(len(values) == 1 for values in checksums.values()), "ranks' parameters differ"
    saved = {pod: torch.load(tmp_path / f"{pod}.pt") for pod in "abc"}
    assert len({result["step"] for result in saved.values()}) == 1
    for pod in "bc":
        for mine, theirs in zip(saved[pod]["parameters"], saved["a"]["parameters"]):
            assert torch.equal(mine, theirs), pod
