#include "trainer_image/trainer/emulated_slowdown.h"

#include <fstream>

#include "operator/common/log.h"

namespace fulcrum::trainer {

double EmulatedSlowdown::Current(const std::string& job) {
  if (file_.empty()) return factor_;
  std::error_code error;
  const auto modified = std::filesystem::last_write_time(file_, error);
  if (error || modified == seen_) return factor_;
  seen_ = modified;
  std::ifstream input(file_);
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

}  // namespace fulcrum::trainer
