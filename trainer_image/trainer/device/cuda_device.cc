// The CUDA twin of the CPU compute device (compute_device.cc). Compiled only in the CUDA build
// (libtorch from the CUDA torch wheel); its tests run on a GPU machine (docs/trainer.md).
#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "trainer_image/trainer/device/compute_device.h"

namespace fulcrum::trainer {
namespace {

// One CUDA event, destroyed with its owner; one that only orders work needs no timing.
class Event {
 public:
  explicit Event(bool timed = true) {
    cudaEventCreateWithFlags(&event_, timed ? cudaEventDefault : cudaEventDisableTiming);
  }
  ~Event() { cudaEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

class CudaDevice final : public ComputeDevice {
 public:
  CudaDevice(c10::DeviceIndex index, std::string product, int64_t memory)
      : index_(index), product_(std::move(product)), memory_(memory) {}

  torch::Device device() const override { return {torch::kCUDA, index_}; }
  std::string product() const override { return product_; }
  int64_t memory_bytes() const override { return memory_; }
  void* CurrentStream() const override { return Stream(); }

  void StartCompute() override { cudaEventRecord(start_.get(), Stream()); }
  void EndCompute() override { cudaEventRecord(stop_.get(), Stream()); }
  double ComputeSeconds() override {
    cudaEventSynchronize(stop_.get());
    float milliseconds = 0.0f;
    if (cudaEventElapsedTime(&milliseconds, start_.get(), stop_.get()) != cudaSuccess) return 0.0;
    return milliseconds / 1000.0;
  }
  // Gathered on the device (one small kernel), then one asynchronous copy into pinned memory from
  // the caching host allocator, which keeps the block until the copy has finished.
  DeferredScalars DeferToHost(const std::vector<torch::Tensor>& scalars) override {
    const torch::Tensor values = GatherScalars(scalars, device());
    DeferredScalars deferred{
        torch::empty({values.numel()},
                     torch::TensorOptions().dtype(torch::kFloat64).pinned_memory(true)),
        nullptr};
    deferred.host.copy_(values, /*non_blocking=*/true);
    auto arrived = std::make_shared<Event>(/*timed=*/false);
    cudaEventRecord(arrived->get(), Stream());
    deferred.arrived = arrived;
    return deferred;
  }
  std::vector<double> ReadDeferred(const DeferredScalars& deferred) override {
    if (deferred.arrived)
      cudaEventSynchronize(static_cast<const Event*>(deferred.arrived.get())->get());
    return ScalarValues(deferred.host);
  }
  // Allocated, not reserved: the allocator's cache keeps blocks of earlier, larger steps (so the
  // reserved peak only grows), and on an allocation failure it frees that cache and tries again.
  // What the step's tensors needed at once is what predicts the next out-of-memory.
  int64_t PeakMemoryBytes() override {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_);
    return stats
        .allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
        .peak;
  }
  void ResetPeakMemory() override { c10::cuda::CUDACachingAllocator::resetPeakStats(index_); }
  void ReleaseCachedMemory() override { c10::cuda::CUDACachingAllocator::emptyCache(); }

  // A stream from c10's pool per call (they round-robin), so loader threads copy in parallel
  // with each other and with the compute stream. Pinned staging comes from the caching host
  // allocator, which keeps each block until the copy that reads it has finished.
  DeviceBatch StageOnDevice(const std::vector<torch::Tensor>& host) override {
    const c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool(false, index_);
    const c10::cuda::CUDAStreamGuard guard(stream);
    DeviceBatch staged;
    for (const torch::Tensor& tensor : host)
      staged.tensors.push_back(tensor.pin_memory().to(device(), /*non_blocking=*/true));
    auto copied = std::make_shared<Event>(/*timed=*/false);
    cudaEventRecord(copied->get(), stream.stream());
    staged.copied = copied;
    return staged;
  }
  void WaitStaged(const DeviceBatch& batch) override {
    if (!batch.copied) return;
    cudaEventSynchronize(static_cast<const Event*>(batch.copied.get())->get());
    // The tensors were allocated on the copy stream; the compute stream now uses them too.
    const c10::Stream compute = c10::cuda::getCurrentCUDAStream(index_).unwrap();
    for (const torch::Tensor& tensor : batch.tensors) tensor.record_stream(compute);
  }

 private:
  cudaStream_t Stream() const { return c10::cuda::getCurrentCUDAStream(index_).stream(); }

  c10::DeviceIndex index_;
  std::string product_;
  int64_t memory_;
  Event start_;
  Event stop_;
};

}  // namespace

Result<std::unique_ptr<ComputeDevice>> OpenCudaDevice(int index, const std::string& where) {
  const int count = c10::cuda::device_count();
  if (count == 0) {
    return InvalidArgument("--device",
                           "cuda was asked for but no CUDA device is visible" + where +
                               ": the pod needs a GPU node's nvidia.com/gpu and the NVIDIA "
                               "container runtime (NVIDIA_VISIBLE_DEVICES, the driver); use "
                               "--device cpu only for CPU training");
  }
  if (index < 0 || index >= count) {
    return InvalidArgument("--device-index", "must be in [0, " + std::to_string(count) +
                                                 "): this process sees " + std::to_string(count) +
                                                 " CUDA device(s)");
  }
  cudaDeviceProp properties{};
  if (cudaError_t error = cudaGetDeviceProperties(&properties, index); error != cudaSuccess) {
    return MakeError(ErrorCode::kUnavailable,
                     std::string("cudaGetDeviceProperties failed: ") + cudaGetErrorString(error));
  }
  const auto device = static_cast<c10::DeviceIndex>(index);
  c10::cuda::set_device(device);
  return std::unique_ptr<ComputeDevice>(std::make_unique<CudaDevice>(
      device, properties.name, static_cast<int64_t>(properties.totalGlobalMem)));
}

}  // namespace fulcrum::trainer
