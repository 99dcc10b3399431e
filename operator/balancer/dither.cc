#include "operator/balancer/dither.h"

#include <algorithm>
#include <cmath>

namespace fulcrum::balancer {
namespace {

// SplitMix64 finaliser: a well-mixed bit per (seed, pair), so pairs flip out of phase.
uint64_t Mix(uint64_t value) {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

// Pairs workers of similar batch size (so the amplitude suits both); with an odd number to
// dither, the last one is paired with the busiest other worker, whose relative change is then
// the smallest.
std::vector<int> PairUp(const DitherRequest& request) {
  std::vector<int> members(request.workers_to_dither.begin(), request.workers_to_dither.end());
  std::stable_sort(members.begin(), members.end(),
                   [&](int x, int y) { return request.batches[x] > request.batches[y]; });
  if (members.size() % 2 == 0) return members;
  int partner = -1;
  for (int i = 0; i < static_cast<int>(request.batches.size()); ++i) {
    if (std::find(members.begin(), members.end(), i) != members.end()) continue;
    if (partner < 0 || request.batches[i] > request.batches[partner]) partner = i;
  }
  if (partner >= 0) {
    members.push_back(partner);
  } else {
    members.pop_back();
  }
  return members;
}

}  // namespace

std::vector<int> DitherBatches(const DitherRequest& request) {
  std::vector<int> batches(request.batches.begin(), request.batches.end());
  const std::vector<int> members = PairUp(request);
  const int64_t phase = request.step / std::max(1, request.period_steps);
  for (std::size_t pair = 0; pair + 1 < members.size(); pair += 2) {
    const bool flip = ((static_cast<uint64_t>(phase) + Mix(request.seed ^ pair)) & 1U) != 0;
    const int up = flip ? members[pair] : members[pair + 1];
    const int down = flip ? members[pair + 1] : members[pair];
    const int smaller = std::min(batches[up], batches[down]);
    int amount = std::max(1, static_cast<int>(std::lround(request.fraction * smaller)));
    amount = std::min(
        {amount, request.max_batches[up] - batches[up], batches[down] - request.min_batches[down]});
    if (amount <= 0) continue;
    batches[up] += amount;
    batches[down] -= amount;
  }
  return batches;
}

}  // namespace fulcrum::balancer
