// Kubelet's crash-loop back-off for restarting a container: the first restart
// is immediate, then each waits twice as long as the one before (10 s, 20 s,
// ... at most 5 min); a container that ran for longer than twice the maximum
// before it ended starts again from the beginning.
#pragma once

#include <chrono>

#include "common/backoff.h"

namespace fulcrum::local_node {

inline constexpr BackoffPolicy kKubeletRestartBackoff{.initial = std::chrono::seconds(10),
                                                      .max = std::chrono::minutes(5)};

class RestartBackoff {
 public:
  explicit RestartBackoff(BackoffPolicy policy = kKubeletRestartBackoff) : policy_(policy) {}
  // How long to wait before restarting a container that ran for `ran_for` and ended.
  std::chrono::milliseconds NextDelay(std::chrono::milliseconds ran_for);

 private:
  BackoffPolicy policy_;
  int restarts_ = 0;  // since the last reset; the first is immediate
};

}  // namespace fulcrum::local_node
