#include "trainer_image/trainer/sharding/shard_plan.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace fulcrum::trainer {

Result<std::vector<ShardRange>> PlanShards(int64_t elements, std::span<const double> weights,
                                           int64_t alignment) {
  if (elements < 0) return InvalidArgument("elements", "must be >= 0");
  if (alignment < 1) return InvalidArgument("alignment", "must be >= 1");
  if (weights.empty()) return InvalidArgument("shard weights", "need one weight per rank");
  long double total = 0.0L;
  for (std::size_t rank = 0; rank < weights.size(); ++rank) {
    const double weight = weights[rank];
    if (!std::isfinite(weight) || weight < 0.0) {
      return InvalidArgument("shard weights", "rank " + std::to_string(rank) + "'s weight is " +
                                                  std::to_string(weight) +
                                                  ": weights must be finite and >= 0");
    }
    total += weight;
  }
  if (total <= 0.0L) {
    return InvalidArgument("shard weights", "every weight is 0: at least one rank must hold state");
  }
  std::vector<ShardRange> plan(weights.size());
  long double cumulative = 0.0L;
  int64_t begin = 0;
  for (std::size_t rank = 0; rank < weights.size(); ++rank) {
    cumulative += weights[rank];
    // The last rank of positive weight ends the space (the sum up to it is the total, added in
    // the same order); every boundary before it is rounded.
    int64_t end = elements;
    if (cumulative < total) {
      // The exact boundary, rounded to the nearest multiple of the alignment.
      const long double exact = static_cast<long double>(elements) * cumulative / total;
      end = static_cast<int64_t>(std::llround(exact / static_cast<long double>(alignment))) *
            alignment;
      end = std::clamp(end, begin, elements);
    }
    // A weight of 0 holds nothing, wherever rounding put the boundary.
    if (weights[rank] == 0.0) end = begin;
    plan[rank] = ShardRange{begin, end};
    begin = end;
  }
  return plan;
}

std::vector<ShardSource> SourcesFor(int64_t elements, std::span<const ShardRange> held) {
  // Every boundary any held range has inside [0, elements): between two neighbours, the set of
  // ranks holding the piece is constant.
  std::vector<int64_t> cuts = {0, elements};
  for (const ShardRange& range : held) {
    for (int64_t cut : {range.begin, range.end}) {
      if (cut > 0 && cut < elements) cuts.push_back(cut);
    }
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<ShardSource> sources;
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    const ShardRange piece{cuts[i], cuts[i + 1]};
    int source = -1;
    for (std::size_t rank = 0; rank < held.size(); ++rank) {
      if (held[rank].begin <= piece.begin && piece.end <= held[rank].end) {
        source = static_cast<int>(rank);
        break;
      }
    }
    // Neighbouring pieces from the same rank are one piece: one collective, not several.
    if (!sources.empty() && sources.back().rank == source) {
      sources.back().range.end = piece.end;
    } else {
      sources.push_back(ShardSource{source, piece});
    }
  }
  return sources;
}

}  // namespace fulcrum::trainer
