#include "trainer_image/trainer/loop/trainer_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <cmath>

#include "common/http_endpoints.h"

namespace fulcrum::trainer {

struct TrainerMetrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<HttpEndpoints> server;  // after the registry it reads: stops before it goes
  prometheus::Histogram* step_seconds = nullptr;
  prometheus::Counter* samples = nullptr;
  prometheus::Counter* data_wait_seconds = nullptr;
  prometheus::Gauge* local_batch = nullptr;
  prometheus::Gauge* loss = nullptr;
  prometheus::Gauge* generation = nullptr;
  prometheus::Gauge* step = nullptr;
};

TrainerMetrics::TrainerMetrics(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TrainerMetrics::~TrainerMetrics() = default;

Result<std::unique_ptr<TrainerMetrics>> TrainerMetrics::Start(const std::string& host, int port,
                                                              const std::string& job,
                                                              const std::string& pod) {
  auto impl = std::make_unique<Impl>();
  if (port >= 0) {
    const prometheus::Registry* registry = impl->registry.get();
    Result<std::unique_ptr<HttpEndpoints>> server = HttpEndpoints::Start(
        host + ":" + std::to_string(port), {},
        [registry] { return prometheus::TextSerializer().Serialize(registry->Collect()); },
        "--metrics-port");
    if (!server.ok()) return server.error();
    impl->server = std::move(server).value();
  }
  const prometheus::Labels labels = {{"job_name", job}, {"pod", pod}};
  impl->step_seconds = &prometheus::BuildHistogram()
                            .Name("fulcrum_trainer_step_seconds")
                            .Help("Wall time of one optimizer step")
                            .Register(*impl->registry)
                            .Add(labels, prometheus::Histogram::BucketBoundaries{
                                             0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                             0.5, 1, 2.5, 5, 10});
  impl->samples = &prometheus::BuildCounter()
                       .Name("fulcrum_trainer_samples_total")
                       .Help("Samples this trainer trained on")
                       .Register(*impl->registry)
                       .Add(labels);
  impl->data_wait_seconds =
      &prometheus::BuildCounter()
           .Name("fulcrum_trainer_data_wait_seconds_total")
           .Help(
               "Time steps waited for their batch before compute (reading, copying to the "
               "device); its rate over the step time's is the data-bound fraction")
           .Register(*impl->registry)
           .Add(labels);
  auto gauge = [&](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(*impl->registry).Add(labels);
  };
  impl->local_batch = gauge("fulcrum_trainer_local_batch", "Local batch of the last step");
  impl->loss = gauge("fulcrum_trainer_loss", "Global mean training loss of the last step");
  impl->generation = gauge("fulcrum_trainer_generation", "Membership generation");
  impl->step = gauge("fulcrum_trainer_step", "Optimizer steps completed");
  return std::unique_ptr<TrainerMetrics>(new TrainerMetrics(std::move(impl)));
}

int TrainerMetrics::port() const {
  return impl_->server ? impl_->server->port() : -1;
}

void TrainerMetrics::ObserveStep(double step_seconds, double data_wait_seconds, int local_batch,
                                 double loss, int64_t generation, int64_t step) {
  impl_->step_seconds->Observe(step_seconds);
  impl_->data_wait_seconds->Increment(data_wait_seconds);
  impl_->samples->Increment(local_batch);
  impl_->local_batch->Set(local_batch);
  if (std::isfinite(loss)) impl_->loss->Set(loss);
  impl_->generation->Set(static_cast<double>(generation));
  impl_->step->Set(static_cast<double>(step));
}

}  // namespace fulcrum::trainer
