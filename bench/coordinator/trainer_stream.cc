#include "bench/coordinator/trainer_stream.h"

#include <utility>

namespace fulcrum::bench {

TrainerStream::TrainerStream(std::shared_ptr<grpc::Channel> channel, MessageHandler on_message,
                             Written& written)
    : channel_(std::move(channel)),
      stub_(fulcrum::v1::Coordinator::NewStub(channel_)),
      on_message_(std::move(on_message)),
      written_(written) {}

TrainerStream::~TrainerStream() {
  // gRPC calls into this object until OnDone: wait for it (after Close it comes promptly).
  Close();
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [&] { return done_; });
}

void TrainerStream::Start(fulcrum::v1::TrainerMessage hello) {
  stub_->async()->Session(&context_, this);
  AddHold();  // released by Close: until then OnDone waits, so Send may always StartWrite
  StartRead(&incoming_);
  Send(std::move(hello));
  StartCall();
}

bool TrainerStream::Send(fulcrum::v1::TrainerMessage message) {
  fulcrum::v1::TrainerMessage* next = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (closed_ || queue_.size() >= kMaxQueued) return false;
    queue_.push_back(std::move(message));
    if (writing_) return true;  // OnWriteDone starts it
    writing_ = true;
    next = &queue_.front();  // a deque keeps references to its elements across push_back
  }
  StartWrite(next);
  return true;
}

void TrainerStream::Close() {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
  }
  context_.TryCancel();
  RemoveHold();
}

void TrainerStream::OnReadDone(bool ok) {
  if (!ok) {  // the coordinator ended the stream; OnDone follows once the owner closes it
    broken_ = true;
    return;
  }
  on_message_(incoming_);
  StartRead(&incoming_);
}

void TrainerStream::OnWriteDone(bool ok) {
  fulcrum::v1::TrainerMessage* next = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (ok) {
      written_.messages.fetch_add(1, std::memory_order_relaxed);
      if (queue_.front().has_step_report())
        written_.reports.fetch_add(1, std::memory_order_relaxed);
    }
    queue_.pop_front();
    if (!ok) {
      broken_ = true;
      queue_.clear();
    }
    if (queue_.empty()) {
      writing_ = false;
      return;
    }
    next = &queue_.front();
  }
  StartWrite(next);
}

void TrainerStream::OnDone(const grpc::Status& status) {
  std::lock_guard lock(mutex_);
  status_ = status;
  done_ = true;
  broken_ = true;
  finished_.notify_all();
}

bool TrainerStream::done() const {
  std::lock_guard lock(mutex_);
  return done_;
}

grpc::Status TrainerStream::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

}  // namespace fulcrum::bench
