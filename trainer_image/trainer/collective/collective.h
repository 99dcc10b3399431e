// The one collective interface the training loop uses, with a Gloo (CPU, c10d) and an NCCL
// (GPU, FULCRUM_WITH_CUDA) implementation chosen once at start-up. Torch-free on purpose:
// spans of host memory in, errors as values out, so a dead peer is a Status, not a hang.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace fulcrum::trainer {

// A collective started and not yet waited for. Wait once; destroying one unwaited waits too.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual Status Wait() = 0;  // ends at the collective timeout with an error
};

// A collective that already ran to completion when it was started (backends without overlap).
class FinishedCollective final : public PendingCollective {
 public:
  explicit FinishedCollective(Status status) : status_(std::move(status)) {}
  Status Wait() override { return status_; }

 private:
  Status status_;
};

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // In place: every rank ends with the element-wise sum over ranks (identical on all ranks).
  virtual Status AllReduceSum(std::span<float> values) = 0;
  // The same, started now and finished by Wait, so that it overlaps with what the caller does
  // meanwhile (the rest of backward). `values` must stay alive and untouched until then. Every
  // rank starts its collectives in the same order; they complete in that order.
  virtual Result<std::unique_ptr<PendingCollective>> StartAllReduceSum(std::span<float> values) = 0;
  // The same on values in GPU memory, in place, ordered after the work already queued on
  // `producer_stream` (a cudaStream_t; the stream that wrote them). Only device backends (NCCL)
  // take device memory; a host backend answers FAILED_PRECONDITION.
  virtual Result<std::unique_ptr<PendingCollective>> StartAllReduceSumOnDevice(
      std::span<float> device_values, void* producer_stream) = 0;
  virtual Status AllReduceSum(std::span<double> values) = 0;
  // In place: every rank ends with root's bytes; all ranks pass the same size.
  virtual Status Broadcast(std::span<std::byte> bytes, int root) = 0;
  // From any thread: every operation in flight, and every later one, fails promptly instead
  // of waiting out the timeout, and none touches its caller's memory after failing. For a
  // generation the coordinator replaced because a member hung: its peers would otherwise wait
  // for it until the collective timeout. Returns false where the backend cannot (operations
  // then end at the timeout, as before).
  virtual bool Abort(const std::string& reason) = 0;
};

struct CollectiveOptions {
  int rank = 0;
  int world_size = 1;
  std::string interface_host = "127.0.0.1";  // address this rank's transport binds to
  std::chrono::milliseconds timeout{30000};  // a collective that takes longer has failed
};

}  // namespace fulcrum::trainer
