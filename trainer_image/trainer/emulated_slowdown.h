// Emulated heterogeneity for tests, demos and benchmarks only: after each step's compute the
// trainer sleeps (factor - 1) x the measured compute time. The factor comes from
// --emulated-slowdown and, while running, from --slowdown-file when that file changes.
#pragma once

#include <filesystem>
#include <string>

namespace fulcrum::trainer {

class EmulatedSlowdown {
 public:
  EmulatedSlowdown(double factor, std::string file) : factor_(factor), file_(std::move(file)) {}
  // The factor for this step; logs every change, labelled as emulation.
  double Current(const std::string& job);

 private:
  double factor_;
  std::string file_;
  std::filesystem::file_time_type seen_{};
};

}  // namespace fulcrum::trainer
