// One emulated trainer's Session stream, on gRPC's callback API: the load generator holds
// thousands of them, and a thread each (as fulcrum-trainer's CoordinatorLink uses) would
// measure the generator's scheduler instead of the coordinator.
//
// Threading: Start, Send and Close are called by one owner thread (the job's driver, under the
// job's lock); the callbacks run on gRPC's threads. The stream holds a gRPC "hold" until Close,
// so OnDone cannot run while the owner may still start a write.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "fulcrum/v1/coordinator.grpc.pb.h"
#include "operator/coordinator/ordered_writes.h"

namespace fulcrum::bench {

class TrainerStream final
    : public grpc::ClientBidiReactor<fulcrum::v1::TrainerMessage, fulcrum::v1::CoordinatorMessage> {
 public:
  using MessageHandler = std::function<void(const fulcrum::v1::CoordinatorMessage&)>;

  // What gRPC took off the streams' queues (not just what was queued), for the window's rates.
  struct Written {
    std::atomic<uint64_t> messages{0};
    std::atomic<uint64_t> reports{0};
  };

  // Each stream gets a channel (a TCP connection) of its own, like a trainer pod.
  TrainerStream(std::shared_ptr<grpc::Channel> channel, MessageHandler on_message,
                Written& written);
  ~TrainerStream() override;
  TrainerStream(const TrainerStream&) = delete;
  TrainerStream& operator=(const TrainerStream&) = delete;

  void Start(fulcrum::v1::TrainerMessage hello);
  // Queues a message; false when the stream is closing or its queue is full (the
  // coordinator stopped reading), in which case the message is dropped.
  bool Send(fulcrum::v1::TrainerMessage message);
  // Ends the stream as a killed trainer would: cancelled, no goodbye.
  void Close();
  // The coordinator ended the stream (an error status, or it went away).
  bool broken() const { return broken_.load(); }
  bool done() const;
  grpc::Status status() const;

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  static constexpr std::size_t kMaxQueued = 1024;

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<fulcrum::v1::Coordinator::Stub> stub_;
  grpc::ClientContext context_;
  MessageHandler on_message_;
  Written& written_;
  fulcrum::v1::CoordinatorMessage incoming_;
  mutable std::mutex mutex_;
  std::condition_variable finished_;
  coordinator::OrderedWrites<fulcrum::v1::TrainerMessage> writes_;
  bool closed_ = false;  // by Close: the hold is released, nothing more may start
  bool done_ = false;
  grpc::Status status_;
  std::atomic<bool> broken_{false};
};

}  // namespace fulcrum::bench
