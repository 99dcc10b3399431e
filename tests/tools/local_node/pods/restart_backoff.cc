#include "tests/tools/local_node/pods/restart_backoff.h"

#include <algorithm>

namespace fulcrum::local_node {

std::chrono::milliseconds RestartBackoff::NextDelay(std::chrono::milliseconds ran_for) {
  if (ran_for > 2 * policy_.maximum) current_ = std::chrono::milliseconds(0);
  const std::chrono::milliseconds delay = current_;
  current_ = current_.count() == 0 ? policy_.initial : std::min(2 * current_, policy_.maximum);
  return delay;
}

}  // namespace fulcrum::local_node
