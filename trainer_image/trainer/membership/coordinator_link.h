// The trainer's end of the Session stream: a thread that keeps the stream open (reconnecting
// with backoff; the trainer keeps training on its last assignment meanwhile), a heartbeat
// thread, and a mailbox of received Assignments and Controls.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "fulcrum/v1/coordinator.grpc.pb.h"
#include "trainer_image/trainer/membership/membership.h"

namespace fulcrum::trainer {

struct CoordinatorLinkOptions {
  std::string address;
  // The CA certificate (PEM) the coordinator's TLS certificate must chain to; empty: plaintext.
  std::string root_certificates;
  fulcrum::v1::Hello hello;  // sent on every (re)connect
  // A Heartbeat goes out when nothing else was sent for this long. Short, because the
  // coordinator takes a member silent for its hang timeout (1 s by default) for hung.
  std::chrono::milliseconds heartbeat_period{250};
  // HTTP/2 keepalive: a ping after this much silence on the connection, and the connection
  // counts as dead when a ping goes unanswered for keepalive_timeout. So a coordinator whose
  // host vanished (no FIN, no RST) is noticed within seconds, and the trainer reconnects while
  // it trains on its last assignment. The coordinator permits pings this often (CoordinatorServer).
  std::chrono::milliseconds keepalive_time{5000};
  std::chrono::milliseconds keepalive_timeout{5000};
};

class CoordinatorLink final : public Membership {
 public:
  explicit CoordinatorLink(CoordinatorLinkOptions options);
  ~CoordinatorLink() override;

  std::optional<fulcrum::v1::Assignment> WaitForGeneration(
      int64_t after, std::chrono::milliseconds timeout) override;
  bool HasNewerGeneration(int64_t generation) override;
  fulcrum::v1::Assignment PlanAt(const fulcrum::v1::Assignment& base, int64_t step) override;
  std::optional<fulcrum::v1::Control> TakeControl() override;
  std::optional<Error> Fatal() override;
  void Report(const fulcrum::v1::StepReport& report) override;
  void ReportEvaluation(const fulcrum::v1::Evaluation& evaluation) override;
  void Flush(std::chrono::milliseconds timeout) override;
  bool RequestRejoin(int64_t generation, const std::string& reason) override;
  void SetProgress(int64_t generation, int64_t step) override;
  bool WaitForAbandon(int64_t generation, std::stop_token stop) override;

 private:
  void SessionLoop(std::stop_token stop);
  void HeartbeatLoop(std::stop_token stop);
  void Receive(const fulcrum::v1::CoordinatorMessage& message);
  // Queues a message for the writer thread: the training step never waits on the network.
  void Send(fulcrum::v1::TrainerMessage message);
  void WriterLoop(std::stop_token stop);

  CoordinatorLinkOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<fulcrum::v1::Coordinator::Stub> stub_;

  std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  std::condition_variable queued_;  // outgoing_ gained a message; only the writer waits on it
  std::map<int64_t, std::vector<fulcrum::v1::Assignment>> assignments_;  // by generation
  std::deque<fulcrum::v1::Control> controls_;
  std::optional<Error> fatal_;
  int64_t generation_ = 0;
  int64_t step_ = 0;
  std::optional<fulcrum::v1::Rejoin> pending_rejoin_;  // re-sent after a reconnect
  grpc::ClientContext* context_ = nullptr;
  grpc::ClientReaderWriter<fulcrum::v1::TrainerMessage, fulcrum::v1::CoordinatorMessage>* stream_ =
      nullptr;
  std::mutex write_mutex_;                            // one Write at a time on the stream
  std::deque<fulcrum::v1::TrainerMessage> outgoing_;  // guarded by mutex_
  bool writing_ = false;  // the writer holds a message it took from outgoing_; guarded by mutex_
  std::chrono::steady_clock::time_point last_queued_{};  // guarded by mutex_

  std::jthread session_;
  std::jthread heartbeat_;
  std::jthread writer_;
};

}  // namespace fulcrum::trainer
