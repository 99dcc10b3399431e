// Measured throughput on one clock (issue 25): committed samples over the wall time between
// step end times, ΣB / (t_end(i) − t_end(i−n)), all end times read off one rank's clock. Per-rank
// step times cover different intervals (a rank whose all-reduce completes during another's
// sleep, phase shifts between ranks), so neither their median nor an average of per-step rates
// is a rate of the job; the span between two end times on one clock is. Pure; one per job.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

namespace fulcrum::coordinator {

class ThroughputWindow {
 public:
  // Over the last `steps` completed steps (at least 1).
  explicit ThroughputWindow(int steps = 10);

  // Step `step` committed `samples` and ended at `end_seconds` on `clock` (whose clock: the
  // reporting rank's pod and generation). Another clock, a step that does not move forward or
  // an end time that goes back (a restarted trainer) starts the window over from this step.
  void Add(int64_t step, int samples, double end_seconds, const std::string& clock);
  void Clear();

  // Samples committed after the oldest step kept, over the time since it ended; nullopt until
  // two steps are known.
  std::optional<double> SamplesPerSecond() const;
  // Wall time per step over the window; nullopt until two steps are known.
  std::optional<double> StepSeconds() const;

 private:
  struct Entry {
    int64_t step;
    int samples;
    double end_seconds;
  };
  int steps_;
  std::string clock_;
  std::deque<Entry> entries_;
};

}  // namespace fulcrum::coordinator
