// The step's gradients, flattened into buckets that are all-reduced as soon as backward has
// produced them (DDP-style overlap): parameters in reverse order (backward produces the last
// layers' gradients first), cut into buckets of at least `bucket_elements` floats. An autograd
// hook on each parameter copies its finished gradient into its slot; when a bucket is full it is
// started, strictly in bucket order so every rank issues the same collectives in the same order.
// Without overlap the same buckets are filled and started after backward, one by one.
//
// The buffer lives on the parameters' device. NCCL reduces it there in place; Gloo reduces host
// memory, so with GPU parameters each bucket is copied down whole into a pinned mirror just
// before its all-reduce and the reduced buffer goes back up in one asynchronous copy: the mean,
// the norm, clipping and the optimizer then run on the GPU. (Copying each gradient down as it
// came, into pageable memory, synchronised the GPU once per parameter and left the mean and the
// norm to one CPU thread: on an H200 under MPS, ResNet-18's step tail was ~100 ms.) The
// aggregation is the same either way: sums of b_i·ĝ_i, divided by the global batch once all
// have arrived.
//
// State that every rank changes on its own in forward, BatchNorm's running statistics above all,
// rides the last bucket too: each rank adds its buffers times its local batch, and every rank
// sets them to the b_i-weighted mean (WriteAveraged), so ranks stay bit-identical at no extra
// collective. DDP instead broadcasts rank 0's buffers before each forward, which drops what the
// other ranks saw.
//
// The step's control values (what the ranks must agree on: the batch sum, the loss, leave and
// checkpoint flags, rank 0's next plan) ride at the end of the last bucket, so a step costs one
// chain of bucket collectives and no separate all-reduce: on short steps the extra collective's
// latency was most of the step's tail. The last bucket waits for SetControl. They are reduced as
// float32 like the gradients: exact for integers up to 2^24 (batches, plans, flags), and the
// loss sum to float precision.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "common/result.h"
#include "trainer_image/trainer/collective/collective.h"

namespace fulcrum::trainer {

// Which memory the collective reduces: the buffer's own (NCCL on a GPU, anything on the CPU),
// the host's (Gloo), through which GPU buckets are staged, or a host mirror even of a CPU buffer
// (the staging path's CPU twin, for tests).
enum class CollectiveMemory { kBufferDevice, kHost, kHostMirror };

class GradientBuckets {
 public:
  // Registers one hook per parameter; the object must outlive the parameters' backward passes.
  // `averaged`: tensors averaged across ranks each step (model buffers), any dtype.
  GradientBuckets(std::vector<torch::Tensor> parameters, int64_t bucket_elements,
                  torch::Device buffer_device, std::vector<torch::Tensor> averaged = {},
                  CollectiveMemory collective_memory = CollectiveMemory::kBufferDevice);
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  int64_t elements() const { return gradient_elements_; }
  std::size_t bucket_count() const { return buckets_.size(); }

  // Starts a step on `collective` whose control values are `control_elements` long.
  // `producer_stream` is the CUDA stream backward runs on when the buffer is in GPU memory
  // (nullptr otherwise).
  void BeginStep(Collective& collective, void* producer_stream, std::size_t control_elements);
  // From now until Finish, each gradient backward produces is final (the last micro-step):
  // hooks copy it and start full buckets. Not called: nothing overlaps.
  void Arm();
  bool started_any() const;
  // This rank's control values for the step (BeginStep's length), and the averaged tensors as
  // they are now times `averaged_weight` (the local batch); the last bucket goes out with them
  // once its gradients are in too. Call once per step, before Finish. Each of `on_device` (a
  // 0-dim tensor, the step's loss sum) is added to its slot: on the device where the collective
  // reduces device memory, so the host need not wait for backward to know it.
  struct DeviceValue {
    std::size_t index = 0;
    torch::Tensor value;
  };
  void SetControl(std::span<const double> values, double averaged_weight = 0.0,
                  std::span<const DeviceValue> on_device = {});
  // Buckets the last Finish found already started by backward's hooks: the overlap achieved.
  std::size_t overlapped_buckets() const { return overlapped_; }
  // Copies the gradients the hooks did not see (all of them without overlap; unused
  // parameters; a rank with no samples contributes zeros), starts the remaining buckets in
  // order and waits for all. After an error the step must not be committed.
  Status Finish();
  // After a successful Finish: the control values summed over ranks.
  std::vector<double> SummedControl() const;
  // After Finish: Σ x² of this rank's own gradients, taken from each bucket just before its
  // all-reduce overwrote it (the gradient noise scale's input: the caller divides by the square
  // of what they were summed over, the local batch times any loss scale). A 0-dim float64
  // tensor on the buffer's device, read when the host needs it (ComputeDevice::DeferToHost).
  torch::Tensor LocalSquaredNorm() const;
  // Sets every parameter's gradient to its summed gradient divided by `global_batch` (a view of
  // the buffer, valid until the next BeginStep, which sets the gradients to none), scaled
  // down to a global L2 norm of `max_norm` where it is larger (max_norm 0: no clipping). The
  // norm is of the aggregated gradient, which every rank holds bit for bit, so every rank
  // clips identically. Returns the norm before clipping, a 0-dim float64 tensor on the buffer's
  // device: clipping scales on the device, as torch.nn.utils.clip_grad_norm_ does, so nothing
  // here waits for the device.
  torch::Tensor WriteMeanGradients(double global_batch, double max_norm = 0.0);
  // After a successful Finish: sets each averaged tensor to the ranks' sum divided by
  // `total_weight` (the global batch; integer tensors rounded). Nothing when it is 0.
  void WriteAveraged(double total_weight);

 private:
  struct Slot {
    int64_t offset = 0;
    int64_t count = 0;
    std::size_t bucket = 0;
  };
  struct Bucket {
    int64_t offset = 0;
    int64_t count = 0;
    std::vector<std::size_t> parameters;
  };

  void OnGradient(std::size_t parameter, const torch::Tensor& gradient);
  void CopyIntoSlot(std::size_t parameter, const torch::Tensor& gradient);
  // A parameter's place in flat_, shaped and strided as the parameter (kept in slot_views_).
  const torch::Tensor& SlotView(std::size_t parameter);
  void StartReadyBuckets();  // with mutex_ held
  // The values a bucket's collective reduces: flat_ itself, or its host mirror after a copy.
  std::span<float> CollectiveValues(int64_t offset, int64_t count, bool last);
  bool staged() const { return host_.defined(); }
  torch::Tensor MakeMirror(int64_t elements) const;  // pinned where flat_ is in GPU memory

  std::vector<torch::Tensor> parameters_;
  std::vector<Slot> slots_;
  std::vector<torch::Tensor> slot_views_;  // SlotView's, one per parameter
  std::vector<Bucket> buckets_;
  int64_t gradient_elements_ = 0;
  std::vector<torch::Tensor> averaged_;
  int64_t averaged_elements_ = 0;
  torch::Tensor flat_;  // the gradients, the averaged tensors, then room for the control values
  torch::Tensor control_staging_;  // pinned host copy of the control values (GPU buffer only)
  // Pinned host mirror of flat_ where a host collective reduces a GPU buffer (else undefined).
  torch::Tensor host_;

  mutable std::mutex mutex_;  // hooks run on autograd's threads
  Collective* collective_ = nullptr;
  void* producer_stream_ = nullptr;
  bool armed_ = false;
  std::size_t control_elements_ = 0;
  bool control_set_ = false;
  std::vector<bool> ready_;           // per parameter: copied this step
  std::vector<std::size_t> missing_;  // per bucket: parameters not yet copied
  std::size_t next_bucket_ = 0;       // the next bucket to start
  std::vector<std::unique_ptr<PendingCollective>> pending_;
  std::optional<Error> error_;
  std::size_t overlapped_ = 0;
  // Σ x² of the started buckets' local gradients, float64 on flat_'s device: accumulated with no
  // host sync, read once after Finish.
  torch::Tensor local_squares_;
};

}  // namespace fulcrum::trainer
