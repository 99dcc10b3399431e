#include "operator/coordinator/throughput_window.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace fulcrum::coordinator {

ThroughputWindow::ThroughputWindow(int steps) : steps_(std::max(1, steps)) {}

void ThroughputWindow::Add(int64_t step, int samples, double end_seconds,
                           const std::string& clock) {
  if (!std::isfinite(end_seconds)) return;
  if (clock != clock_ || (!entries_.empty() && (step <= entries_.back().step ||
                                                end_seconds <= entries_.back().end_seconds))) {
    entries_.clear();
    clock_ = clock;
  }
  entries_.push_back({step, samples, end_seconds});
  while (static_cast<int>(entries_.size()) > steps_ + 1) entries_.pop_front();
}

void ThroughputWindow::Clear() {
  entries_.clear();
  clock_.clear();
}

std::optional<double> ThroughputWindow::SamplesPerSecond() const {
  if (entries_.size() < 2) return std::nullopt;
  // The oldest entry only marks where the window starts: its samples were committed before.
  double samples = 0.0;
  for (auto it = std::next(entries_.begin()); it != entries_.end(); ++it) samples += it->samples;
  return samples / (entries_.back().end_seconds - entries_.front().end_seconds);
}

std::optional<double> ThroughputWindow::StepSeconds() const {
  if (entries_.size() < 2) return std::nullopt;
  return (entries_.back().end_seconds - entries_.front().end_seconds) /
         static_cast<double>(entries_.back().step - entries_.front().step);
}

}  // namespace fulcrum::coordinator
