#include "trainer_image/trainer/device/emulated_slowdown.h"

#include <time.h>

#include <algorithm>
#include <fstream>

#include "common/log.h"

namespace fulcrum::trainer {

double EmulatedSlowdown::Current(const std::string& job) {
  if (file_.empty()) return factor_;
  std::error_code error;
  const auto modified = std::filesystem::last_write_time(file_, error);
  if (error || modified == seen_) return factor_;
  std::ifstream input(file_);
  if (!input) return factor_;
  input >> std::ws;
  // A writer that truncates and then writes can be read in between, and on a coarse file clock
  // both carry one mtime: marking the empty file seen would lose the number written next.
  if (input.peek() == std::char_traits<char>::eof()) return factor_;
  seen_ = modified;
  double factor = 0.0;
  if (!(input >> factor) || !(factor >= 1.0 && factor <= 100.0)) {
    log::Warn("trainer", job, "ignoring --slowdown-file: expected a number in [1, 100]",
              {{"file", file_}});
    return factor_;
  }
  if (factor != factor_) {
    log::Info("trainer", job, "EMULATION: slowdown factor changed",
              {{"emulation", true}, {"from", factor_}, {"to", factor}});
  }
  factor_ = factor;
  return factor_;
}

double EmulatedSlowdown::SleepSeconds(double factor, double wall_seconds, double cpu_seconds) {
  if (!(factor > 1.0)) return 0.0;
  return (factor - 1.0) * std::max(0.0, std::min(wall_seconds, cpu_seconds));
}

double ProcessCpuSeconds() {
  timespec now{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now) != 0) return 0.0;
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

}  // namespace fulcrum::trainer
