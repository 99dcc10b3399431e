// The gRPC side of the coordinator: one Session stream per trainer, authenticated by the
// job's token, dispatched to that job's state machine (job_session.h). A ticker thread drives
// timeouts and pending generations. The operator hosts this service; fulcrum-coordinator
// runs it alone for local training.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "fulcrum/v1/coordinator.grpc.pb.h"
#include "operator/coordinator/job_registry.h"
#include "operator/coordinator/job_session.h"
#include "operator/coordinator/job_session_config.h"
#include "operator/coordinator/job_session_snapshot.h"
#include "operator/coordinator/tls_certificates.h"

namespace fulcrum::coordinator {

// Largest message either side accepts; larger ones fail with RESOURCE_EXHAUSTED.
inline constexpr int kMaxMessageBytes = 64 * 1024;
// Longest string field (a DNS name is at most 253 characters).
inline constexpr std::size_t kMaxStringBytes = 253;

// What one misbehaving or hostile client can take from the coordinator. Streams are capped in
// all and per job, a stream must say Hello soon, and a trainer that stops reading its
// messages is cancelled rather than left holding a growing queue.
struct CoordinatorLimits {
  std::chrono::milliseconds hello_timeout{10000};  // from opening a stream to its Hello
  int max_streams = 4096;                          // open streams, with and without a Hello
  int max_streams_per_job = 512;                   // streams that said Hello to one job
  std::size_t max_queued_messages = 256;           // unsent messages per stream
};

// A report that completed a step (every rank has reported it), timed from the moment it was
// read off its stream until the step's plan decision ran and what it sent was queued: how
// long the coordinator takes to react, lock waits included.
struct StepCompletion {
  std::string_view job;
  int64_t step = 0;
  std::size_t messages_sent = 0;  // Assignments of a new plan, 0 when the plan stands
  Clock::duration latency{};
};

// On gRPC's callback API: a stream is a reactor, not a thread (a thread per stream and a
// writer thread each cost 6,400 threads and half a gigabyte at 3,200 trainers,
// docs/benchmarks.md). Each job has a lock of its own, so one job's plan decision never
// holds up another's trainers; a lock over the job table is held only to look a job up.
class CoordinatorService final : public fulcrum::v1::Coordinator::CallbackService,
                                 public JobRegistry {
 public:
  explicit CoordinatorService(CoordinatorLimits limits = {});
  ~CoordinatorService() override;
  CoordinatorService(const CoordinatorService&) = delete;
  CoordinatorService& operator=(const CoordinatorService&) = delete;

  // Registers a job; for a known one, applies the configuration in place
  // (JobSession::Reconfigure: members stay, nobody restarts). Only a job that has not started
  // may change its token, and is then started over.
  Status AddJob(JobSessionConfig config) override;
  bool HasJob(const std::string& name) const override;
  // For a trainer whose Hello names no GPU product (or "cpu"): the product of its node, ""
  // when unknown. The operator answers from its node inventory.
  void SetNodeProductLookup(std::function<std::string(const std::string& node)> lookup);
  Status RemoveJob(const std::string& name) override;
  Status SendControl(const std::string& job, fulcrum::v1::Control::Action action,
                     const std::string& reason) override;
  std::vector<JobSessionSnapshot> Snapshot() const;
  std::optional<JobSessionSnapshot> SnapshotOf(const std::string& name) const override;
  // Called on a gRPC thread for every completed step (a metric, a benchmark); it must be
  // quick and must not call back into the service. Set it before the server starts.
  void SetStepObserver(std::function<void(const StepCompletion&)> observer);
  // Called with a job's name whenever the coordinator sent its trainers something (a new
  // generation, a plan, a control): what the job's status shows has changed, so the operator
  // reconciles it now instead of polling. Called under the job's lock on a gRPC or ticker
  // thread; it must be quick and must not call back into the service. May be set and cleared
  // (an empty function) at any time: once cleared, it is not running and is not called again.
  void SetJobChangeObserver(std::function<void(std::string_view job)> observer);

  grpc::ServerBidiReactor<fulcrum::v1::TrainerMessage, fulcrum::v1::CoordinatorMessage>* Session(
      grpc::CallbackServerContext* context) override;

 private:
  class Stream;  // one trainer's stream: reads, the outgoing queue, its end
  struct Job;    // a JobSession, its streams by pod, and the lock over both

  std::shared_ptr<Job> FindJob(std::string_view name) const;
  // The first message of a stream: checks the Hello and joins the trainer to its job.
  Result<std::shared_ptr<Job>> Open(const fulcrum::v1::TrainerMessage& first,
                                    std::string_view peer_host,
                                    const std::shared_ptr<Stream>& stream);
  // Counts a new stream against max_streams and starts its Hello deadline; ForgetStream, when
  // the stream is done, takes it off again.
  Status AdmitStream(grpc::CallbackServerContext* context);
  void SaidHello(grpc::CallbackServerContext* context);
  void ForgetStream(grpc::CallbackServerContext* context);
  Status Dispatch(Job& job, const std::string& pod, const fulcrum::v1::TrainerMessage& message,
                  Clock::time_point received);
  void Close(Job& job, const std::string& pod, const Stream* stream);
  void Deliver(Job& job, Outbox& out);  // requires job.mutex
  std::vector<std::shared_ptr<Job>> AllJobs() const;
  void TickLoop(std::stop_token stop);

  const CoordinatorLimits limits_;
  mutable std::shared_mutex jobs_mutex_;  // the table only; each Job has its own lock
  std::map<std::string, std::shared_ptr<Job>, std::less<>> jobs_;
  std::mutex streams_mutex_;
  // Every open stream; those still waiting for their Hello have its deadline.
  std::map<grpc::CallbackServerContext*, std::optional<Clock::time_point>> streams_;
  mutable std::mutex lookup_mutex_;
  std::function<std::string(const std::string& node)> node_product_;
  std::mutex change_observer_mutex_;  // held while it runs: clearing it waits for a call
  std::function<void(std::string_view job)> change_observer_;
  std::function<void(const StepCompletion&)> step_observer_;  // set before serving
  std::jthread ticker_;
};

// The coordinator's listening port, credentials, message limits and keepalive on `builder`;
// `port` receives the bound port once the server starts. Shared by CoordinatorServer and the
// coordinator benchmark's bare-gRPC baseline, so both serve streams the same way.
void ConfigureCoordinatorServer(grpc::ServerBuilder& builder, const std::string& listen_address,
                                const std::optional<PemKeyPair>& tls, int* port);

// A running gRPC server with the service on `listen_address` ("127.0.0.1:0" picks a port).
// The port is not shared (no SO_REUSEPORT): a second process cannot serve it at the same time.
class CoordinatorServer {
 public:
  // With a service of its own. `tls`: the serving certificate and key; without one the
  // stream is plaintext, for local runs only (the job token crosses the network in the clear).
  static Result<std::unique_ptr<CoordinatorServer>> Start(
      const std::string& listen_address, const std::optional<PemKeyPair>& tls = std::nullopt);
  // Serving `service`, which must outlive the server (the operator keeps its jobs across the
  // times it leads and serves).
  static Result<std::unique_ptr<CoordinatorServer>> Start(
      const std::string& listen_address, CoordinatorService& service,
      const std::optional<PemKeyPair>& tls = std::nullopt);
  ~CoordinatorServer();

  int port() const { return port_; }
  CoordinatorService& service() { return *service_; }
  void Wait() { server_->Wait(); }
  void Shutdown();

 private:
  CoordinatorServer() = default;
  std::unique_ptr<CoordinatorService> owned_service_;
  CoordinatorService* service_ = nullptr;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace fulcrum::coordinator
