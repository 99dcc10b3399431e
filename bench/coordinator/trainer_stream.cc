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
    if (closed_ || writes_.size() >= kMaxQueued) return false;
    next = writes_.Push(std::move(message));
  }
  if (next != nullptr) StartWrite(next);  // else OnWriteDone starts it
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
      if (writes_.in_flight().has_step_report()) {
        written_.reports.fetch_add(1, std::memory_order_relaxed);
      }
    } else {
      broken_ = true;
    }
    next = writes_.Written(/*drop_rest=*/!ok);
  }
  if (next != nullptr) StartWrite(next);
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
