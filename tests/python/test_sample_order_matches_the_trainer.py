"""The Python runtime splits a dataset exactly as fulcrum-trainer does: the same per-epoch
permutation (compiled from trainer_image/trainer/data/sample_order.cc and compared number for
number), the same prefix-sum shards, and every sample once per epoch whatever the plans did."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from conftest import ROOT
from fulcrum.sample_order import SampleOrder, shard_for_rank, split_mix64

CASES = [(10, 0), (10, 7), (37, 12345), (1, 3), (1000, 2 ** 63 + 5)]

REFERENCE = r"""
#include <cstdio>
#include "trainer_image/trainer/data/sample_order.h"
using namespace fulcrum::trainer;
int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const long long n = std::atoll(argv[i]);
    const unsigned long long seed = std::strtoull(argv[i + 1], nullptr, 10);
    SampleOrder order(n, seed, true);
    for (long long index : order.Indices({0, 2 * n + 3})) std::printf("%lld ", index);
    std::printf("\n");
  }
  uint64_t state = 42;
  std::printf("%llu\n", static_cast<unsigned long long>(SplitMix64(state)));
}
"""


@pytest.fixture(scope="module")
def trainer_orders(tmp_path_factory):
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("no g++ to compile the trainer's sample_order.cc")
    work = tmp_path_factory.mktemp("order")
    (work / "reference.cc").write_text(REFERENCE)
    binary = work / "reference"
    built = subprocess.run([compiler, "-std=c++20", f"-I{ROOT}", str(work / "reference.cc"),
                            str(ROOT / "trainer_image/trainer/data/sample_order.cc"), "-o",
                            str(binary)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    arguments = [str(value) for case in CASES for value in case]
    ran = subprocess.run([str(binary), *arguments], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    return [[int(v) for v in line.split()] for line in lines[:-1]], int(lines[-1])


def test_permutations_are_the_trainers_number_for_number(trainer_orders):
    orders, split_mix = trainer_orders
    assert split_mix64(42)[1] == split_mix
    for (n, seed), expected in zip(CASES, orders):
        assert SampleOrder(n, seed).indices(range(0, 2 * n + 3)) == expected, (n, seed)


def test_a_pinned_permutation_so_a_change_on_either_side_shows():
    assert SampleOrder(10, 0).indices(range(0, 10)) == [6, 3, 2, 9, 8, 1, 4, 7, 0, 5]
    assert SampleOrder(10, 0, shuffle=False).indices(range(5, 15)) == [5, 6, 7, 8, 9,
                                                                         0, 1, 2, 3, 4]


def test_shards_are_prefix_sums_of_the_plan():
    assert [shard_for_rank(100, [3, 5, 8], r) for r in range(3)] == [
        range(100, 103), range(103, 108), range(108, 116)]
    assert shard_for_rank(0, [0, 4], 0) == range(0, 0)
    with pytest.raises(ValueError, match="rank is 3 but the plan has 3 ranks"):
        shard_for_rank(0, [1, 2, 3], 3)
    with pytest.raises(ValueError, match="batches must be >= 0"):
        shard_for_rank(0, [1, -2, 3], 0)


def test_every_sample_once_per_epoch_across_plan_and_membership_changes():
    n = 97
    order = SampleOrder(n, seed=11)
    rng = random.Random(5)
    cursor = 0
    seen: dict[int, list[int]] = {}
    while cursor < 3 * n:
        world = rng.randint(1, 4)  # membership changes too
        plan = [rng.randint(0, 9) for _ in range(world)]
        if sum(plan) == 0:
            continue
        for rank in range(world):
            for position in shard_for_rank(cursor, plan, rank):
                seen.setdefault(position // n, []).extend(order.indices(range(position,
                                                                              position + 1)))
        cursor += sum(plan)
    for epoch in range(3):
        assert sorted(seen[epoch]) == list(range(n)), epoch
