#include "trainer_image/trainer/collective/gradient_buckets.h"

#include <algorithm>

namespace fulcrum::trainer {
namespace {

// targets[i] = sources[i] for every i, as two multi-tensor operations (zero, then add) instead of
// a copy each: on a GPU two kernels rather than one launch per tensor (ResNet-18 has 60
// BatchNorm buffers, and these launches come after a host sync, with the GPU idle). 0 + x is x
// exactly (a -0 becomes +0).
void AssignEach(const std::vector<torch::Tensor>& targets,
                const std::vector<torch::Tensor>& sources) {
  if (targets.empty()) return;
  at::_foreach_zero_(targets);
  at::_foreach_add_(targets, sources);
}

}  // namespace

GradientBuckets::GradientBuckets(std::vector<torch::Tensor> parameters, int64_t bucket_elements,
                                 torch::Device buffer_device, std::vector<torch::Tensor> averaged,
                                 CollectiveMemory collective_memory)
    : parameters_(std::move(parameters)),
      slots_(parameters_.size()),
      slot_views_(parameters_.size()),
      averaged_(std::move(averaged)) {
  // Grouped by dtype, float32 first (BatchNorm's statistics, then its integer counters), so that
  // WriteAveraged converts each group once and assigns it in multi-tensor operations.
  auto order = [](const torch::Tensor& tensor) {
    return tensor.scalar_type() == torch::kFloat32 ? -1 : static_cast<int>(tensor.scalar_type());
  };
  std::stable_sort(
      averaged_.begin(), averaged_.end(),
      [&](const torch::Tensor& a, const torch::Tensor& b) { return order(a) < order(b); });
  int64_t offset = 0;
  for (std::size_t i = parameters_.size(); i-- > 0;) {
    if (buckets_.empty() || buckets_.back().count >= bucket_elements) {
      buckets_.push_back(Bucket{.offset = offset, .count = 0, .parameters = {}});
    }
    Bucket& bucket = buckets_.back();
    const int64_t count = parameters_[i].numel();
    slots_[i] = Slot{.offset = offset, .count = count, .bucket = buckets_.size() - 1};
    bucket.count += count;
    bucket.parameters.push_back(i);
    offset += count;
  }
  // The control values ride in the last bucket, so there is one even without parameters.
  if (buckets_.empty()) buckets_.push_back(Bucket{.offset = 0, .count = 0, .parameters = {}});
  gradient_elements_ = offset;
  for (const torch::Tensor& tensor : averaged_) averaged_elements_ += tensor.numel();
  flat_ = torch::zeros({offset + averaged_elements_},
                       torch::TensorOptions().dtype(torch::kFloat32).device(buffer_device));
  if (collective_memory == CollectiveMemory::kHostMirror ||
      (collective_memory == CollectiveMemory::kHost && flat_.is_cuda())) {
    host_ = MakeMirror(flat_.numel());
  }
  ready_.assign(parameters_.size(), false);
  missing_.assign(buckets_.size(), 0);
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    parameters_[i].register_hook(
        [this, i](const torch::Tensor& gradient) { OnGradient(i, gradient); });
  }
}

torch::Tensor GradientBuckets::MakeMirror(int64_t elements) const {
  torch::Tensor mirror = torch::zeros({elements}, torch::kFloat32);
  return flat_.is_cuda() ? mirror.pin_memory() : mirror;
}

void GradientBuckets::BeginStep(Collective& collective, void* producer_stream,
                                std::size_t control_elements) {
  std::lock_guard lock(mutex_);
  const int64_t needed =
      gradient_elements_ + averaged_elements_ + static_cast<int64_t>(control_elements);
  if (flat_.numel() < needed) {
    // A larger world's plan: every value is written again each step, so nothing is carried over.
    flat_ = torch::zeros({needed}, flat_.options());
    if (staged()) host_ = MakeMirror(needed);
  }
  // WriteMeanGradients left every gradient a view of the buffer, which this step's hooks
  // overwrite: backward starts from none (it then hands over its own tensors, no kernel).
  for (torch::Tensor& parameter : parameters_) parameter.mutable_grad() = torch::Tensor();
  collective_ = &collective;
  producer_stream_ = producer_stream;
  armed_ = false;
  control_elements_ = control_elements;
  control_set_ = false;
  ready_.assign(parameters_.size(), false);
  for (std::size_t b = 0; b < buckets_.size(); ++b) missing_[b] = buckets_[b].parameters.size();
  missing_.back() += 1;  // the control values
  next_bucket_ = 0;
  pending_.clear();
  error_.reset();
  local_squares_ = torch::zeros({}, flat_.options().dtype(torch::kFloat64));
}

void GradientBuckets::Arm() {
  std::lock_guard lock(mutex_);
  armed_ = true;
}

bool GradientBuckets::started_any() const {
  std::lock_guard lock(mutex_);
  return next_bucket_ > 0;
}

void GradientBuckets::SetControl(std::span<const double> values, double averaged_weight,
                                 std::span<const DeviceValue> on_device) {
  std::lock_guard lock(mutex_);
  if (control_set_ || values.size() != control_elements_) {
    error_ = MakeError(ErrorCode::kInternal,
                       "control values set twice or with a length other than BeginStep's");
    return;
  }
  if (!averaged_.empty()) {
    torch::NoGradGuard no_grad;
    // Joined, weighted and copied in three kernels, not two or three per tensor (BatchNorm has
    // three buffers per layer): on a GPU each launch is host time the last bucket waits for.
    std::vector<torch::Tensor> pieces;
    pieces.reserve(averaged_.size());
    for (const torch::Tensor& tensor : averaged_)
      pieces.push_back(tensor.detach().reshape({-1}).to(torch::kFloat32));
    flat_.narrow(0, gradient_elements_, averaged_elements_)
        .copy_(torch::cat(pieces).mul_(averaged_weight));
  }
  const int64_t control_offset = gradient_elements_ + averaged_elements_;
  const auto count = static_cast<int64_t>(values.size());
  std::vector<double> all(values.begin(), values.end());
  const bool on_this_device = flat_.is_cuda() && !staged();
  for (const DeviceValue& extra : on_device) {
    if (extra.index >= all.size()) {
      error_ = MakeError(ErrorCode::kInternal, "a device control value beyond the control values");
      return;
    }
    // Elsewhere the host writes the values, so it reads these first (a wait on the device).
    if (!on_this_device) all[extra.index] += extra.value.item<double>();
  }
  auto to_float = [](double value) { return static_cast<float>(value); };
  if (staged()) {
    // Straight into the host mirror the collective reduces; the last bucket's copy down leaves
    // them alone.
    std::transform(all.begin(), all.end(), host_.data_ptr<float>() + control_offset, to_float);
  } else if (flat_.is_cuda()) {
    // Through pinned memory, ordered on the producer stream like the gradients' copies: the
    // staging buffer is rewritten only next step, after Finish waited for this collective.
    if (control_staging_.numel() < count) {
      control_staging_ = torch::empty({count}, torch::kFloat32).pin_memory();
    }
    std::transform(all.begin(), all.end(), control_staging_.data_ptr<float>(), to_float);
    torch::NoGradGuard no_grad;
    torch::Tensor control = flat_.narrow(0, control_offset, count);
    control.copy_(control_staging_.narrow(0, 0, count), /*non_blocking=*/true);
    // Added in float64 and rounded once, as the host does.
    for (const DeviceValue& extra : on_device) {
      torch::Tensor slot = control.narrow(0, static_cast<int64_t>(extra.index), 1);
      slot.copy_(slot.to(torch::kFloat64).add(extra.value.reshape({1}).to(flat_.device())));
    }
  } else {
    std::transform(all.begin(), all.end(), flat_.data_ptr<float>() + control_offset, to_float);
  }
  control_set_ = true;
  --missing_.back();
  StartReadyBuckets();
}

std::vector<double> GradientBuckets::SummedControl() const {
  std::lock_guard lock(mutex_);
  const torch::Tensor control = (staged() ? host_ : flat_)
                                    .narrow(0, gradient_elements_ + averaged_elements_,
                                            static_cast<int64_t>(control_elements_))
                                    .to(torch::kCPU)
                                    .contiguous();
  const float* values = control.data_ptr<float>();
  return std::vector<double>(values, values + control_elements_);
}

const torch::Tensor& GradientBuckets::SlotView(std::size_t parameter) {
  const torch::Tensor& tensor = parameters_[parameter];
  torch::Tensor& view = slot_views_[parameter];
  // Made again only when flat_ was reallocated or the parameter changed its layout: a view is a
  // few microseconds of host time, and WriteMeanGradients needs one per parameter with the
  // device idle.
  if (view.defined() && view.is_alias_of(flat_) && view.strides() == tensor.strides()) return view;
  torch::Tensor slot = flat_.narrow(0, slots_[parameter].offset, slots_[parameter].count);
  // In the parameter's own memory order (a channels_last weight's too): the copies in are
  // straight copies, not transposes, and multi-tensor kernels over parameters, gradients and
  // optimizer state keep their fast path, which needs them all laid out alike.
  view = tensor.is_non_overlapping_and_dense() ? slot.as_strided(tensor.sizes(), tensor.strides())
                                               : slot.view(tensor.sizes());
  return view;
}

void GradientBuckets::CopyIntoSlot(std::size_t parameter, const torch::Tensor& gradient) {
  const Slot& slot = slots_[parameter];
  torch::NoGradGuard no_grad;
  const torch::Tensor& destination = SlotView(parameter);
  if (gradient.defined()) {
    destination.copy_(gradient);
  } else {
    destination.zero_();
  }
  ready_[parameter] = true;
  --missing_[slot.bucket];
}

void GradientBuckets::OnGradient(std::size_t parameter, const torch::Tensor& gradient) {
  std::lock_guard lock(mutex_);
  if (!armed_ || ready_[parameter]) return;
  // The hook sees this micro-step's gradient before it is added to .grad: add what earlier
  // micro-steps accumulated.
  const torch::Tensor& accumulated = parameters_[parameter].grad();
  CopyIntoSlot(parameter, accumulated.defined() ? accumulated + gradient : gradient);
  StartReadyBuckets();
}

void GradientBuckets::StartReadyBuckets() {
  while (!error_ && next_bucket_ < buckets_.size() && missing_[next_bucket_] == 0) {
    const Bucket& bucket = buckets_[next_bucket_];
    // The last bucket ends where the averaged tensors start: it carries them and the control.
    const bool last = next_bucket_ + 1 == buckets_.size();
    if (bucket.count > 0) {
      torch::NoGradGuard no_grad;
      // Squared in the gradients' dtype, summed in float64: one temporary the bucket's size,
      // not a float64 copy and its square (four times the bucket's bytes, per bucket, per step).
      local_squares_ += flat_.narrow(0, bucket.offset, bucket.count).square().sum(torch::kFloat64);
    }
    std::span<float> values = CollectiveValues(bucket.offset, bucket.count, last);
    Result<std::unique_ptr<PendingCollective>> started =
        flat_.is_cuda() && !staged()
            ? collective_->StartAllReduceSumOnDevice(values, producer_stream_)
            : collective_->StartAllReduceSum(values);
    if (!started.ok()) {
      error_ = started.error();
      return;
    }
    pending_.push_back(std::move(*started));
    ++next_bucket_;
  }
}

std::span<float> GradientBuckets::CollectiveValues(int64_t offset, int64_t count, bool last) {
  const int64_t averaged = last ? averaged_elements_ : 0;
  const auto length = static_cast<std::size_t>(count + averaged) + (last ? control_elements_ : 0);
  if (!staged()) return {flat_.data_ptr<float>() + offset, length};
  // A blocking copy on the stream that wrote these gradients (the hooks' copies and the averaged
  // tensors' are on it), so the collective never reads the mirror early; the control values are
  // in the mirror already (SetControl).
  torch::NoGradGuard no_grad;
  host_.narrow(0, offset, count + averaged).copy_(flat_.narrow(0, offset, count + averaged));
  return {host_.data_ptr<float>() + offset, length};
}

Status GradientBuckets::Finish() {
  std::unique_lock lock(mutex_);
  armed_ = false;
  if (!control_set_ && !error_) {
    // The last bucket would never start: every rank would wait for it until the timeout.
    error_ = MakeError(ErrorCode::kInternal, "GradientBuckets::Finish before SetControl");
  }
  overlapped_ = next_bucket_;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (!ready_[i]) CopyIntoSlot(i, parameters_[i].grad());
  }
  StartReadyBuckets();
  std::vector<std::unique_ptr<PendingCollective>> pending = std::move(pending_);
  std::optional<Error> error = error_;
  lock.unlock();
  for (std::unique_ptr<PendingCollective>& work : pending) {
    if (Status status = work->Wait(); !status.ok() && !error) error = status.error();
  }
  if (error) return *error;
  if (staged()) {
    // Back up in one copy, queued before the mean and the optimizer that read it; the mirror is
    // next written by the next step's first bucket, after this copy on the same stream.
    const int64_t reduced =
        gradient_elements_ + averaged_elements_ + static_cast<int64_t>(control_elements_);
    torch::NoGradGuard no_grad;
    flat_.narrow(0, 0, reduced).copy_(host_.narrow(0, 0, reduced), /*non_blocking=*/true);
  }
  return Ok();
}

torch::Tensor GradientBuckets::LocalSquaredNorm() const {
  std::lock_guard lock(mutex_);
  return local_squares_.defined() ? local_squares_
                                  : torch::zeros({}, flat_.options().dtype(torch::kFloat64));
}

torch::Tensor GradientBuckets::WriteMeanGradients(double global_batch, double max_norm) {
  torch::NoGradGuard no_grad;
  torch::Tensor gradients = flat_.narrow(0, 0, gradient_elements_);
  gradients.div_(global_batch);
  // In float64, so the norm does not depend on how float32 partial sums were ordered.
  const torch::Tensor norm = gradients.to(torch::kFloat64).norm();
  // max_norm / norm where the norm is larger, else 1 (a multiplication by 1 is exact): a norm of
  // 0 (infinity) or NaN (NaN) gives 1, as the host's `if (norm > max_norm)` did. Divided in
  // float64 and applied in the gradients' float32, as `gradients.mul_(max_norm / norm)` was.
  if (max_norm > 0.0) {
    gradients.mul_(torch::full_like(norm, max_norm).div_(norm).nan_to_num_(1.0).clamp_max_(1.0));
  }
  // Each gradient becomes its mean in the buffer itself, no copy (the next BeginStep lets go).
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    torch::Tensor& parameter = parameters_[i];
    const torch::Tensor& mean = SlotView(i);
    parameter.mutable_grad() =
        parameter.device() == flat_.device() ? mean : mean.to(parameter.device());
  }
  return norm;
}

void GradientBuckets::WriteAveraged(double total_weight) {
  if (total_weight <= 0.0 || averaged_.empty()) return;
  torch::NoGradGuard no_grad;
  // One division for all of them; then each dtype's group (the constructor put them together)
  // rounded if integer, cast once and assigned together.
  const torch::Tensor means =
      flat_.narrow(0, gradient_elements_, averaged_elements_).div(total_weight);
  int64_t offset = 0;
  for (std::size_t first = 0; first < averaged_.size();) {
    const c10::ScalarType type = averaged_[first].scalar_type();
    std::vector<torch::Tensor> targets;
    int64_t elements = 0;
    for (std::size_t i = first; i < averaged_.size() && averaged_[i].scalar_type() == type; ++i) {
      targets.push_back(averaged_[i]);
      elements += averaged_[i].numel();
    }
    first += targets.size();
    torch::Tensor group = means.narrow(0, offset, elements);
    offset += elements;
    group = (c10::isFloatingType(type) ? group : group.round()).to(type);
    std::vector<torch::Tensor> sources;
    int64_t at = 0;
    for (const torch::Tensor& target : targets) {
      sources.push_back(group.narrow(0, at, target.numel()).view(target.sizes()));
      at += target.numel();
    }
    if (type == torch::kBool) {  // no addition to assign with
      for (std::size_t i = 0; i < targets.size(); ++i) targets[i].copy_(sources[i]);
    } else {
      AssignEach(targets, sources);
    }
  }
}

}  // namespace fulcrum::trainer
