#include "trainer_image/trainer/gradient_buckets.h"

namespace fulcrum::trainer {

GradientBuckets::GradientBuckets(std::vector<torch::Tensor> parameters, int64_t bucket_elements,
                                 torch::Device buffer_device)
    : parameters_(std::move(parameters)), slots_(parameters_.size()) {
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
  flat_ = torch::zeros({offset}, torch::TensorOptions().dtype(torch::kFloat32).device(buffer_device));
  ready_.assign(parameters_.size(), false);
  missing_.assign(buckets_.size(), 0);
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    parameters_[i].register_hook([this, i](const torch::Tensor& gradient) { OnGradient(i, gradient); });
  }
}

void GradientBuckets::BeginStep(Collective& collective, void* producer_stream) {
  std::lock_guard lock(mutex_);
  collective_ = &collective;
  producer_stream_ = producer_stream;
  armed_ = false;
  ready_.assign(parameters_.size(), false);
  for (std::size_t b = 0; b < buckets_.size(); ++b) missing_[b] = buckets_[b].parameters.size();
  next_bucket_ = 0;
  pending_.clear();
  error_.reset();
}

void GradientBuckets::Arm() {
  std::lock_guard lock(mutex_);
  armed_ = true;
}

bool GradientBuckets::started_any() const {
  std::lock_guard lock(mutex_);
  return next_bucket_ > 0;
}

void GradientBuckets::CopyIntoSlot(std::size_t parameter, const torch::Tensor& gradient) {
  const Slot& slot = slots_[parameter];
  torch::NoGradGuard no_grad;
  torch::Tensor destination = flat_.narrow(0, slot.offset, slot.count);
  if (gradient.defined()) {
    destination.copy_(gradient.reshape({-1}));
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
    std::span<float> values(flat_.data_ptr<float>() + bucket.offset,
                            static_cast<std::size_t>(bucket.count));
    Result<std::unique_ptr<PendingCollective>> started =
        flat_.is_cuda() ? collective_->StartAllReduceSumOnDevice(values, producer_stream_)
                        : collective_->StartAllReduceSum(values);
    if (!started.ok()) {
      error_ = started.error();
      return;
    }
    pending_.push_back(std::move(*started));
    ++next_bucket_;
  }
}

Status GradientBuckets::Finish() {
  std::unique_lock lock(mutex_);
  armed_ = false;
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
  return Ok();
}

void GradientBuckets::WriteMeanGradients(double global_batch) {
  torch::NoGradGuard no_grad;
  flat_.div_(global_batch);
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    torch::Tensor& parameter = parameters_[i];
    const torch::Tensor mean =
        flat_.narrow(0, slots_[i].offset, slots_[i].count).view(parameter.sizes());
    if (parameter.grad().defined()) {
      parameter.mutable_grad().copy_(mean);
    } else {
      parameter.mutable_grad() = mean.to(parameter.device(), /*non_blocking=*/false, /*copy=*/true);
    }
  }
}

}  // namespace fulcrum::trainer
