// Emulated heterogeneity for tests, demos and benchmarks only: after each step's compute the
// trainer sleeps (factor - 1) x the measured compute time. The factor comes from
// --emulated-slowdown and, while running, from --slowdown-file when that file changes.
//
// "Measured compute time" is the CPU time the compute used, capped by its wall time. Emulated
// workers share this machine's cores; time spent waiting for a core another emulated worker
// holds is an artefact of the emulation, not work a slower GPU would do, so it is not
// multiplied by the factor (with wall time it was, which made a 4x worker 4x as noisy).
#pragma once

#include <filesystem>
#include <string>

namespace fulcrum::trainer {

class EmulatedSlowdown {
 public:
  EmulatedSlowdown(double factor, std::string file) : factor_(factor), file_(std::move(file)) {}
  // The factor for this step; logs every change, labelled as emulation.
  double Current(const std::string& job);

  // How long to sleep after a compute that took `wall_seconds` and used `cpu_seconds` of this
  // process's CPU time.
  static double SleepSeconds(double factor, double wall_seconds, double cpu_seconds);

 private:
  double factor_;
  std::string file_;
  std::filesystem::file_time_type seen_{};
};

// CPU time this process has used so far (all threads), in seconds.
double ProcessCpuSeconds();

}  // namespace fulcrum::trainer
