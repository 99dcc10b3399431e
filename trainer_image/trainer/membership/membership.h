// Where a trainer learns its generation, rank and batches: the coordinator (CoordinatorLink)
// or a fixed group given on the command line (StaticMembership, for tests and benchmarks).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>

#include "common/result.h"
#include "fulcrum/v1/coordinator.pb.h"

namespace fulcrum::trainer {

class Membership {
 public:
  virtual ~Membership() = default;
  // The first Assignment of a generation newer than `after`, if one arrives within `timeout`.
  virtual std::optional<fulcrum::v1::Assignment> WaitForGeneration(
      int64_t after, std::chrono::milliseconds timeout) = 0;
  virtual bool HasNewerGeneration(int64_t generation) = 0;
  // The batches of `generation` that apply at `step`: the latest update with
  // apply_at_step <= step, or the generation's own. Only rank 0's answer is used.
  virtual fulcrum::v1::Assignment PlanAt(const fulcrum::v1::Assignment& base, int64_t step) = 0;
  virtual std::optional<fulcrum::v1::Control> TakeControl() = 0;
  // Set when membership can never work (wrong token, unknown job): the trainer exits.
  virtual std::optional<Error> Fatal() = 0;
  virtual void Report(const fulcrum::v1::StepReport& report) = 0;
  virtual void ReportEvaluation(const fulcrum::v1::Evaluation& evaluation) = 0;
  // Waits up to `timeout` for what was reported to be sent (before the trainer exits).
  virtual void Flush(std::chrono::milliseconds timeout) = 0;
  // This trainer's collective failed: ask for a new generation. False if that cannot happen.
  virtual bool RequestRejoin(int64_t generation, const std::string& reason) = 0;
  virtual void SetProgress(int64_t generation, int64_t step) = 0;
  // Blocks until an Assignment of a generation newer than `generation` says to abandon it
  // (abandon_previous: a member hung or vanished, so its collectives cannot complete): true;
  // or until `stop` is requested: false.
  virtual bool WaitForAbandon(int64_t generation, std::stop_token stop) = 0;
};

// One generation with fixed rank, world and batches; a failure cannot be recovered.
class StaticMembership final : public Membership {
 public:
  explicit StaticMembership(fulcrum::v1::Assignment assignment)
      : assignment_(std::move(assignment)) {}
  std::optional<fulcrum::v1::Assignment> WaitForGeneration(int64_t after,
                                                           std::chrono::milliseconds) override {
    if (after >= assignment_.generation()) return std::nullopt;
    return assignment_;
  }
  bool HasNewerGeneration(int64_t) override { return false; }
  fulcrum::v1::Assignment PlanAt(const fulcrum::v1::Assignment& base, int64_t) override {
    return base;
  }
  std::optional<fulcrum::v1::Control> TakeControl() override { return std::nullopt; }
  std::optional<Error> Fatal() override { return std::nullopt; }
  void Report(const fulcrum::v1::StepReport&) override {}
  void ReportEvaluation(const fulcrum::v1::Evaluation&) override {}
  void Flush(std::chrono::milliseconds) override {}
  bool RequestRejoin(int64_t, const std::string&) override { return false; }
  void SetProgress(int64_t, int64_t) override {}
  bool WaitForAbandon(int64_t, std::stop_token stop) override {
    std::mutex mutex;
    std::unique_lock lock(mutex);
    std::condition_variable_any().wait(lock, stop, [] { return false; });
    return false;  // a fixed group is never replaced
  }

 private:
  fulcrum::v1::Assignment assignment_;
};

}  // namespace fulcrum::trainer
