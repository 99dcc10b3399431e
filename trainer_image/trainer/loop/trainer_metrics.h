// Prometheus metrics of one trainer on --metrics-port (prometheus-cpp's registry, served by
// common/http_endpoints).
#pragma once

#include <memory>
#include <string>

#include "common/result.h"

namespace fulcrum::trainer {

class TrainerMetrics {
 public:
  // port -1: metrics off (every call is a no-op); 0: any free port.
  static Result<std::unique_ptr<TrainerMetrics>> Start(const std::string& host, int port,
                                                       const std::string& job,
                                                       const std::string& pod);
  ~TrainerMetrics();
  int port() const;

  void ObserveStep(double step_seconds, double data_wait_seconds, int local_batch, double loss,
                   int64_t generation, int64_t step);

 private:
  struct Impl;
  explicit TrainerMetrics(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fulcrum::trainer
