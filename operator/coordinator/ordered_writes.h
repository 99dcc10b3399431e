// The writes of one gRPC callback-API stream. gRPC allows one outstanding write per stream, so
// messages queue and go out one at a time, in order. Not thread-safe: the owner's lock guards
// it, and the owner calls StartWrite with what Push and Written return, outside that lock.
// Serves the coordinator's streams and the load generator's emulated trainers alike.
#pragma once

#include <cstddef>
#include <deque>
#include <utility>

namespace fulcrum::coordinator {

template <typename Message>
class OrderedWrites {
 public:
  // Queues `message`; returns it when it is to be written now, nullptr when a write is under
  // way (Written hands it out later).
  Message* Push(Message message) {
    queue_.push_back(std::move(message));
    if (writing_) return nullptr;
    writing_ = true;
    return &queue_.front();  // a deque keeps references to its elements across push_back
  }

  // The write under way is done. `drop_rest`: the stream is gone or ending, forget what is
  // queued. Returns the next message to write, or nullptr, and then no write is under way.
  Message* Written(bool drop_rest) {
    queue_.pop_front();
    if (drop_rest) queue_.clear();
    if (queue_.empty()) {
      writing_ = false;
      return nullptr;
    }
    return &queue_.front();
  }

  const Message& in_flight() const { return queue_.front(); }  // requires writing()
  bool writing() const { return writing_; }
  std::size_t size() const { return queue_.size(); }

 private:
  std::deque<Message> queue_;  // front() is being written while writing_
  bool writing_ = false;
};

}  // namespace fulcrum::coordinator
