#include "trainer_image/trainer/collective/nccl_collective.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

namespace fulcrum::trainer {
namespace {

constexpr const char* kUniqueIdKey = "nccl-unique-id";

Error CudaError(const char* what, cudaError_t error) {
  return MakeError(ErrorCode::kUnavailable, std::string(what) + ": " + cudaGetErrorString(error));
}
Error NcclError(const char* what, ncclResult_t result) {
  return MakeError(ErrorCode::kUnavailable, std::string(what) + ": " + ncclGetErrorString(result));
}

using Deadline = std::chrono::steady_clock::time_point;

// How a poll waits between two looks: it yields (a look every few microseconds) for the first
// millisecond, then sleeps 50 us. A collective at the end of a step usually completes within
// microseconds of the first look, and a sleep's wake-up (the kernel's 50 us timer slack on top of
// the 50 us asked for) was a tenth of a millisecond of idle GPU per step; a peer that is late by
// more than a millisecond is waited for without a busy core.
class PollPause {
 public:
  void operator()() {
    if (std::chrono::steady_clock::now() - start_ < std::chrono::milliseconds(1)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// The communicator is non-blocking (so that joining peers that never come cannot hang the
// trainer): a call may answer ncclInProgress while it goes on in the background. Waits until it
// settles, up to the deadline; ncclInProgress back means the deadline passed.
ncclResult_t Settle(ncclComm_t comm, ncclResult_t result, Deadline deadline) {
  PollPause pause;
  while (result == ncclInProgress) {
    if (std::chrono::steady_clock::now() > deadline) return ncclInProgress;
    pause();
    ncclCommGetAsyncError(comm, &result);
  }
  return result;
}

Deadline DeadlineAfter(std::chrono::milliseconds timeout) {
  return std::chrono::steady_clock::now() + timeout;
}

class NcclCollective;

// Everything queued on the communicator's stream so far, waited for with the deadline.
class NcclPending final : public PendingCollective {
 public:
  explicit NcclPending(NcclCollective& collective) : collective_(&collective) {}
  ~NcclPending() override {
    if (collective_ != nullptr) static_cast<void>(Wait());
  }
  Status Wait() override;

 private:
  NcclCollective* collective_;
};

class NcclCollective final : public Collective {
 public:
  NcclCollective(ncclComm_t comm, cudaStream_t stream, CollectiveOptions options)
      : comm_(comm), stream_(stream), options_(std::move(options)) {
    cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming);
  }
  ~NcclCollective() override {
    cudaEventDestroy(ready_);
    // Finalize flushes what was issued; if it does not settle soon, abort instead.
    if (!aborted_ && Settle(comm_, ncclCommFinalize(comm_),
                            DeadlineAfter(std::chrono::seconds(5))) == ncclSuccess) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
    if (device_buffer_ != nullptr) cudaFree(device_buffer_);
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }

  Status AllReduceSum(std::span<float> values) override {
    return Run(std::as_writable_bytes(values), [&](void* buffer) {
      return ncclAllReduce(buffer, buffer, values.size(), ncclFloat, ncclSum, comm_, stream_);
    });
  }
  // Host memory is staged synchronously (a copy back to pageable memory waits anyway).
  Result<std::unique_ptr<PendingCollective>> StartAllReduceSum(std::span<float> values) override {
    return std::unique_ptr<PendingCollective>(
        std::make_unique<FinishedCollective>(AllReduceSum(values)));
  }
  // In place in GPU memory, after the producer's queued work, without waiting: the overlap path.
  Result<std::unique_ptr<PendingCollective>> StartAllReduceSumOnDevice(
      std::span<float> device_values, void* producer_stream) override {
    if (aborted_ || abort_requested_) {
      return MakeError(ErrorCode::kFailedPrecondition, "communicator was aborted");
    }
    if (cudaError_t error = cudaEventRecord(ready_, static_cast<cudaStream_t>(producer_stream));
        error != cudaSuccess) {
      return CudaError("cudaEventRecord", error);
    }
    if (cudaError_t error = cudaStreamWaitEvent(stream_, ready_, 0); error != cudaSuccess) {
      return CudaError("cudaStreamWaitEvent", error);
    }
    if (ncclResult_t result =
            Enqueued(ncclAllReduce(device_values.data(), device_values.data(), device_values.size(),
                                   ncclFloat, ncclSum, comm_, stream_));
        result != ncclSuccess) {
      return NcclError("ncclAllReduce", result);
    }
    return std::unique_ptr<PendingCollective>(std::make_unique<NcclPending>(*this));
  }
  Status AllReduceSum(std::span<double> values) override {
    return Run(std::as_writable_bytes(values), [&](void* buffer) {
      return ncclAllReduce(buffer, buffer, values.size(), ncclDouble, ncclSum, comm_, stream_);
    });
  }
  Status Broadcast(std::span<std::byte> bytes, int root) override {
    return Run(bytes, [&](void* buffer) {
      return ncclBroadcast(buffer, buffer, bytes.size(), ncclUint8, root, comm_, stream_);
    });
  }
  // The waits below poll; they see the request within 50 us and abort as on a timeout (the
  // communicator is aborted when this object goes). ncclCommAbort itself stays on the training
  // thread, which alone uses the communicator.
  bool Abort(const std::string&) override {
    abort_requested_ = true;
    return true;
  }

 private:
  // Host -> device, the collective, device -> host, then wait with a deadline.
  template <typename Launch>
  Status Run(std::span<std::byte> host, Launch launch) {
    if (aborted_ || abort_requested_) {
      return MakeError(ErrorCode::kFailedPrecondition, "communicator was aborted");
    }
    if (Status status = Reserve(host.size()); !status.ok()) return status;
    if (cudaError_t error = cudaMemcpyAsync(device_buffer_, host.data(), host.size(),
                                            cudaMemcpyHostToDevice, stream_);
        error != cudaSuccess) {
      return CudaError("copy to device", error);
    }
    if (ncclResult_t result = Enqueued(launch(device_buffer_)); result != ncclSuccess) {
      return NcclError("collective", result);
    }
    if (cudaError_t error = cudaMemcpyAsync(host.data(), device_buffer_, host.size(),
                                            cudaMemcpyDeviceToHost, stream_);
        error != cudaSuccess) {
      return CudaError("copy to host", error);
    }
    return WaitWithDeadline();
  }

  friend class NcclPending;
  // A collective call's answer once its enqueueing has settled; a stuck one aborts.
  ncclResult_t Enqueued(ncclResult_t result) {
    result = Settle(comm_, result, DeadlineAfter(options_.timeout));
    if (result != ncclSuccess) aborted_ = true;
    return result;
  }
  Status WaitWithDeadline() {
    const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
    PollPause pause;
    while (true) {
      const cudaError_t state = cudaStreamQuery(stream_);
      if (state == cudaSuccess) return Ok();
      if (state != cudaErrorNotReady) return CudaError("collective", state);
      ncclResult_t async_error = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async_error);
      if (async_error != ncclSuccess && async_error != ncclInProgress) {
        aborted_ = true;
        return NcclError("peer failure", async_error);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        aborted_ = true;
        return MakeError(ErrorCode::kDeadlineExceeded, "NCCL collective timed out");
      }
      if (abort_requested_) {
        aborted_ = true;
        return MakeError(ErrorCode::kUnavailable, "NCCL collective abandoned (Abort)");
      }
      pause();
    }
  }

  Status Reserve(std::size_t bytes) {
    if (bytes <= capacity_) return Ok();
    if (device_buffer_ != nullptr) cudaFree(device_buffer_);
    device_buffer_ = nullptr;
    if (cudaError_t error = cudaMalloc(&device_buffer_, bytes); error != cudaSuccess) {
      capacity_ = 0;
      return CudaError("cudaMalloc", error);
    }
    capacity_ = bytes;
    return Ok();
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
  cudaEvent_t ready_ = nullptr;  // marks the producer's work a device collective waits for
  CollectiveOptions options_;
  void* device_buffer_ = nullptr;
  std::size_t capacity_ = 0;
  bool aborted_ = false;
  std::atomic<bool> abort_requested_{false};  // set by Abort from another thread
};

Status NcclPending::Wait() {
  if (collective_ == nullptr) {
    return MakeError(ErrorCode::kFailedPrecondition, "already waited for");
  }
  return std::exchange(collective_, nullptr)->WaitWithDeadline();
}

}  // namespace

Result<std::unique_ptr<Collective>> ConnectNccl(RendezvousStore& store,
                                                const CollectiveOptions& options, int device) {
  if (cudaError_t error = cudaSetDevice(device); error != cudaSuccess) {
    return CudaError("cudaSetDevice", error);
  }
  ncclUniqueId id;
  if (options.rank == 0) {
    if (ncclResult_t result = ncclGetUniqueId(&id); result != ncclSuccess) {
      return NcclError("ncclGetUniqueId", result);
    }
    std::vector<std::byte> bytes(sizeof id);
    std::memcpy(bytes.data(), &id, sizeof id);
    if (Status status = store.Set(kUniqueIdKey, bytes); !status.ok()) return status.error();
  } else {
    Result<std::vector<std::byte>> bytes = store.Get(kUniqueIdKey);
    if (!bytes.ok()) return bytes.error();
    if (bytes->size() != sizeof id) {
      return InvalidArgument(kUniqueIdKey, "has the wrong size: rank 0 runs another NCCL version?");
    }
    std::memcpy(&id, bytes->data(), sizeof id);
  }
  // Non-blocking, so that a peer that never joins ends in a timeout and an abort, not a hang:
  // the trainer then falls out and rejoins the next generation, as with Gloo.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t result =
      ncclCommInitRankConfig(&comm, options.world_size, id, options.rank, &config);
  if (comm != nullptr) result = Settle(comm, result, DeadlineAfter(options.timeout));
  if (result != ncclSuccess) {
    if (comm != nullptr) ncclCommAbort(comm);
    if (result == ncclInProgress) {
      return MakeError(ErrorCode::kDeadlineExceeded,
                       "NCCL communicator not formed within the collective timeout: not all " +
                           std::to_string(options.world_size) + " ranks joined; aborted");
    }
    return NcclError("ncclCommInitRankConfig", result);
  }
  cudaStream_t stream;
  if (cudaError_t error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      error != cudaSuccess) {
    ncclCommDestroy(comm);
    return CudaError("cudaStreamCreate", error);
  }
  return std::unique_ptr<Collective>(std::make_unique<NcclCollective>(comm, stream, options));
}

}  // namespace fulcrum::trainer
