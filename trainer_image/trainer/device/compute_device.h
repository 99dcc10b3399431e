// Where forward and backward run, and how the trainer measures them there: the CPU (every test
// machine) or one CUDA device (the CUDA build on a GPU). The training loop sees only this
// interface, so the CPU twin exercises the same loop, the same out-of-memory recovery and the
// same reports that a GPU runs.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "trainer_image/trainer/device/device_kind.h"

namespace fulcrum::trainer {

// Tensors copied to the device off the training thread, and what orders their use after the copy
// (a CUDA event on a GPU; nothing on the CPU).
struct DeviceBatch {
  std::vector<torch::Tensor> tensors;
  std::shared_ptr<void> copied;
};

// Scalars the step computed on the device (the loss, the gradient norms), on their way to host
// memory, and what says they have arrived (a CUDA event on a GPU; nothing on the CPU).
struct DeferredScalars {
  torch::Tensor host;  // float64, one per scalar
  std::shared_ptr<void> arrived;
};

class ComputeDevice {
 public:
  virtual ~ComputeDevice() = default;
  virtual torch::Device device() const = 0;
  // The accelerator's product name as the hardware reports it ("NVIDIA H100 80GB HBM3"); empty
  // on the CPU, where the node's label (--gpu-product) is all there is.
  virtual std::string product() const = 0;
  virtual int64_t memory_bytes() const = 0;  // accelerator memory; 0 on the CPU
  // The cudaStream_t forward and backward are queued on; nullptr on the CPU.
  virtual void* CurrentStream() const = 0;

  // Brackets one step's forward and backward. On a GPU the kernels run asynchronously, so the
  // time comes from events recorded on the device's stream, not from host clocks.
  virtual void StartCompute() = 0;
  // Marks the bracket's end (after backward is queued) without waiting for the device.
  virtual void EndCompute() = 0;
  // The bracket's time; waits until the device has reached its end, not for work queued after.
  virtual double ComputeSeconds() = 0;
  double FinishComputeSeconds() {
    EndCompute();
    return ComputeSeconds();
  }

  // A step that waits for the device empties its queue, and the GPU then idles while the host
  // queues the next kernels one by one; so the step waits once for backward's end (its time
  // splits compute from communication) and once for the reduced control values, and reads the
  // loss and the gradient norms only after the update is queued. DeferToHost queues copies of
  // 0-dim tensors to host memory (on a GPU an asynchronous copy into pinned memory and an event
  // on the compute stream); ReadDeferred waits for those copies only, not for kernels queued
  // after them (the optimizer's).
  virtual DeferredScalars DeferToHost(const std::vector<torch::Tensor>& scalars) = 0;
  virtual std::vector<double> ReadDeferred(const DeferredScalars& deferred) = 0;

  // Peak memory since the last ResetPeakMemory: the CUDA caching allocator's peak on a GPU,
  // the process's peak resident set on the CPU (which cannot be reset: a lifetime peak).
  virtual int64_t PeakMemoryBytes() = 0;
  virtual void ResetPeakMemory() = 0;
  // After an out-of-memory error: hand cached blocks back so a smaller retry can fit.
  virtual void ReleaseCachedMemory() = 0;
  // On a loader thread: copies host tensors to the device without touching the compute stream
  // (on a GPU: pinned memory, then an asynchronous copy on a copy stream, then an event).
  virtual DeviceBatch StageOnDevice(const std::vector<torch::Tensor>& host) = 0;
  // On the training thread, before the step uses the batch: waits until the copy is done (the
  // caller times this as data wait) and keeps the copy's memory from being reused too early.
  virtual void WaitStaged(const DeviceBatch& batch) = 0;
};

// kAuto picks CUDA when this build has it and a device is visible, else the CPU. Asking for
// CUDA where there is none is an error naming --device and `where` (the node and the image, so
// a pod on the wrong node or with the CPU image says so).
Result<std::unique_ptr<ComputeDevice>> OpenComputeDevice(DeviceKind kind, int index,
                                                         const std::string& where = "");

std::unique_ptr<ComputeDevice> OpenCpuDevice();

// For the devices' DeferToHost and ReadDeferred: the 0-dim tensors `scalars` (any dtype, any
// device) as one float64 tensor on `device`, and a float64 tensor's values.
torch::Tensor GatherScalars(const std::vector<torch::Tensor>& scalars,
                            torch::Device device = torch::kCPU);
std::vector<double> ScalarValues(const torch::Tensor& host);
#if FULCRUM_TORCH_CUDA
Result<std::unique_ptr<ComputeDevice>> OpenCudaDevice(int index, const std::string& where = "");
#endif

// "on node N (image I)" for device errors; parts that are empty are left out.
std::string DeviceWhere(const std::string& node, const std::string& image);

}  // namespace fulcrum::trainer
