#include "tests/tools/local_node/pods/restart_backoff.h"

namespace fulcrum::local_node {

std::chrono::milliseconds RestartBackoff::NextDelay(std::chrono::milliseconds ran_for) {
  if (ran_for > 2 * policy_.max) restarts_ = 0;
  const std::chrono::milliseconds delay =
      restarts_ == 0
          ? std::chrono::milliseconds(0)
          : std::chrono::duration_cast<std::chrono::milliseconds>(policy_.DelayAt(restarts_ - 1));
  // Counting stops at the cap: further restarts wait no longer.
  if (delay < policy_.max) ++restarts_;
  return delay;
}

}  // namespace fulcrum::local_node
