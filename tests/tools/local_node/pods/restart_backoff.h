// Kubelet's crash-loop back-off for restarting a container: the first restart
// is immediate, then each waits twice as long as the one before (10 s, 20 s,
// ... at most 5 min); a container that ran for longer than twice the maximum
// before it ended starts again from the beginning.
#pragma once

#include <chrono>

namespace fulcrum::local_node {

struct RestartBackoffPolicy {
  std::chrono::milliseconds initial{10'000};
  std::chrono::milliseconds maximum{300'000};
};

class RestartBackoff {
 public:
  explicit RestartBackoff(RestartBackoffPolicy policy = {}) : policy_(policy) {}
  // How long to wait before restarting a container that ran for `ran_for` and ended.
  std::chrono::milliseconds NextDelay(std::chrono::milliseconds ran_for);

 private:
  RestartBackoffPolicy policy_;
  std::chrono::milliseconds current_{0};  // zero: no recent failure
};

}  // namespace fulcrum::local_node
