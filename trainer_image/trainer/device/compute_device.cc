#include "trainer_image/trainer/device/compute_device.h"

#include <sys/resource.h>

#include <chrono>

namespace fulcrum::trainer {
namespace {

class CpuDevice final : public ComputeDevice {
 public:
  torch::Device device() const override { return torch::kCPU; }
  std::string product() const override { return ""; }
  int64_t memory_bytes() const override { return 0; }
  void* CurrentStream() const override { return nullptr; }
  void StartCompute() override { start_ = std::chrono::steady_clock::now(); }
  void EndCompute() override { end_ = std::chrono::steady_clock::now(); }
  double ComputeSeconds() override { return std::chrono::duration<double>(end_ - start_).count(); }
  DeferredScalars DeferToHost(const std::vector<torch::Tensor>& scalars) override {
    return {GatherScalars(scalars), {}};
  }
  std::vector<double> ReadDeferred(const DeferredScalars& deferred) override {
    return ScalarValues(deferred.host);
  }
  int64_t PeakMemoryBytes() override {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<int64_t>(usage.ru_maxrss) * 1024;
  }
  void ResetPeakMemory() override {}
  void ReleaseCachedMemory() override {}
  DeviceBatch StageOnDevice(const std::vector<torch::Tensor>& host) override { return {host, {}}; }
  void WaitStaged(const DeviceBatch&) override {}

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point end_ = start_;
};

}  // namespace

torch::Tensor GatherScalars(const std::vector<torch::Tensor>& scalars, torch::Device device) {
  torch::NoGradGuard no_grad;
  if (scalars.empty()) return torch::empty({0}, torch::kFloat64);
  std::vector<torch::Tensor> values;
  values.reserve(scalars.size());
  for (const torch::Tensor& scalar : scalars)
    values.push_back(scalar.detach().to(device, torch::kFloat64).reshape({1}));
  return torch::cat(values);
}

std::vector<double> ScalarValues(const torch::Tensor& host) {
  const torch::Tensor values = host.contiguous();
  const double* first = values.data_ptr<double>();
  return {first, first + values.numel()};
}

std::unique_ptr<ComputeDevice> OpenCpuDevice() {
  return std::make_unique<CpuDevice>();
}

std::string DeviceWhere(const std::string& node, const std::string& image) {
  std::string where;
  if (!node.empty()) where = " on node " + node;
  if (!image.empty()) where += " (image " + image + ")";
  return where;
}

Result<std::unique_ptr<ComputeDevice>> OpenComputeDevice(DeviceKind kind, int index,
                                                         const std::string& where) {
  if (kind == DeviceKind::kCpu) return OpenCpuDevice();
#if FULCRUM_TORCH_CUDA
  if (kind == DeviceKind::kAuto && !torch::cuda::is_available()) return OpenCpuDevice();
  return OpenCudaDevice(index, where);
#else
  (void)index;
  if (kind == DeviceKind::kAuto) return OpenCpuDevice();
  return InvalidArgument("--device",
                         "cuda was asked for" + where +
                             " but this fulcrum-trainer was built without CUDA (Debian's CPU "
                             "libtorch): GPU jobs need the CUDA image (trainer_image/"
                             "Dockerfile.cuda, the chart's trainerCudaImage); use --device cpu "
                             "only for CPU training");
#endif
}

}  // namespace fulcrum::trainer
