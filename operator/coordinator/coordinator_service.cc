#include "operator/coordinator/coordinator_service.h"

#include <pthread.h>

#include <chrono>
#include <utility>

#include "common/log.h"
#include "operator/coordinator/ordered_writes.h"

namespace fulcrum::coordinator {
namespace {

constexpr auto kTickPeriod = std::chrono::milliseconds(50);

grpc::StatusCode ToGrpcCode(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case ErrorCode::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case ErrorCode::kAlreadyExists:
      return grpc::StatusCode::ALREADY_EXISTS;
    case ErrorCode::kConflict:
      return grpc::StatusCode::ABORTED;
    case ErrorCode::kFailedPrecondition:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case ErrorCode::kInfeasible:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case ErrorCode::kUnauthenticated:
      return grpc::StatusCode::UNAUTHENTICATED;
    case ErrorCode::kPermissionDenied:
      return grpc::StatusCode::PERMISSION_DENIED;
    case ErrorCode::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case ErrorCode::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case ErrorCode::kDeadlineExceeded:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case ErrorCode::kExpired:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case ErrorCode::kInternal:
      return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

grpc::Status ToGrpc(const Error& error) {
  const std::string message =
      error.field.empty() ? error.message : error.field + ": " + error.message;
  return {ToGrpcCode(error.code), message};
}

// Constant-time comparison, so the reply time does not tell how much of a guess was right.
bool SameSecret(const std::string& a, const std::string& b) {
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    difference |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return difference == 0;
}

// The host of a gRPC peer URI ("ipv4:10.0.0.5:41234", "ipv6:[fd00::5]:41234"); the whole
// text for other schemes (unix sockets), which name no host.
std::string PeerHost(const std::string& peer) {
  const auto scheme = peer.find(':');
  if (scheme == std::string::npos ||
      (peer.compare(0, scheme, "ipv4") != 0 && peer.compare(0, scheme, "ipv6") != 0)) {
    return peer;
  }
  std::string host = peer.substr(scheme + 1);
  if (const auto port = host.rfind(':'); port != std::string::npos) host.resize(port);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

Status ValidateHello(const fulcrum::v1::Hello& hello) {
  const std::pair<const std::string*, const char*> strings[] = {
      {&hello.job(), "hello.job"},     {&hello.pod(), "hello.pod"},
      {&hello.node(), "hello.node"},   {&hello.gpu_product(), "hello.gpu_product"},
      {&hello.token(), "hello.token"}, {&hello.store_address(), "hello.store_address"}};
  for (const auto& [value, field] : strings) {
    if (value->size() > kMaxStringBytes) {
      return InvalidArgument(field, "is longer than " + std::to_string(kMaxStringBytes) + " bytes");
    }
  }
  if (hello.job().empty()) return InvalidArgument("hello.job", "must name the job");
  if (hello.pod().empty()) return InvalidArgument("hello.pod", "must be a unique trainer name");
  if (hello.store_address().find(':') == std::string::npos) {
    return InvalidArgument("hello.store_address", "must be host:port of the trainer's TCPStore");
  }
  if (hello.gpu_memory() < 0) return InvalidArgument("hello.gpu_memory", "must be >= 0");
  if (hello.step() < 0) return InvalidArgument("hello.step", "must be >= 0");
  if (hello.generation() < 0) return InvalidArgument("hello.generation", "must be >= 0");
  return Ok();
}

}  // namespace

struct CoordinatorService::Job {
  explicit Job(JobSession job_session) : session(std::move(job_session)) {}
  std::mutex mutex;
  JobSession session;                                                   // guarded by mutex
  std::map<std::string, std::shared_ptr<Stream>, std::less<>> streams;  // by pod; guarded
  bool removed = false;  // RemoveJob took it out of the table; guarded
};

// One trainer's stream. gRPC holds it from Session() until OnDone; the job holds it (to send)
// while the trainer is joined. A shared_ptr keeps it alive for both: `self_` is gRPC's share,
// dropped in OnDone.
//
// Writes go one at a time, in order, from a queue (gRPC allows one outstanding write per
// stream, OrderedWrites). The stream ends with Finish once nothing is being written, and
// nothing is written after Finish: `finishing_` and `writes_` under `mutex_` keep the two
// apart.
class CoordinatorService::Stream final
    : public grpc::ServerBidiReactor<fulcrum::v1::TrainerMessage, fulcrum::v1::CoordinatorMessage>,
      public std::enable_shared_from_this<Stream> {
 public:
  Stream(CoordinatorService& service, grpc::CallbackServerContext* context)
      : service_(service), context_(context) {}

  void Begin(std::shared_ptr<Stream> self) {
    self_ = std::move(self);
    if (Status admitted = service_.AdmitStream(context_); !admitted.ok()) {
      admitted_ = false;
      End(ToGrpc(admitted.error()));
      return;
    }
    StartRead(&incoming_);
  }

  // Queues a message; false when the queue is full, which cancels the stream: its trainer has
  // stopped reading (or reads slower than it is sent to) and must not grow the queue. It
  // reconnects and is told where it stands.
  bool Push(fulcrum::v1::CoordinatorMessage message) {
    fulcrum::v1::CoordinatorMessage* next = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (finishing_) return true;  // ending anyway; the trainer reconnects and is told again
      if (writes_.size() >= service_.limits_.max_queued_messages) {
        if (!overflowed_) context_->TryCancel();
        overflowed_ = true;
        return false;
      }
      next = writes_.Push(std::move(message));
    }
    if (next != nullptr) StartWrite(next);  // else OnWriteDone writes it
    return true;
  }

  void Cancel() { context_->TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the trainer closed the stream, or it was cancelled
      if (job_) {
        service_.Close(*job_, pod_, this);
        End(grpc::Status::OK);
      } else if (context_->IsCancelled()) {  // by TickLoop, or by the client; either way gone
        log::Warn("coordinator", "", "closed a stream that sent no Hello in time",
                  {{"peer", context_->peer()},
                   {"hello_timeout_ms", service_.limits_.hello_timeout.count()}});
        End({grpc::StatusCode::DEADLINE_EXCEEDED,
             "no Hello within " + std::to_string(service_.limits_.hello_timeout.count()) +
                 " ms of opening the stream"});
      } else {
        End({grpc::StatusCode::INVALID_ARGUMENT,
             "no Hello: the stream ended, or its first message was not a valid TrainerMessage"});
      }
      return;
    }
    if (!job_) {
      service_.SaidHello(context_);
      Result<std::shared_ptr<Job>> job =
          service_.Open(incoming_, PeerHost(context_->peer()), shared_from_this());
      if (!job.ok()) {
        End(ToGrpc(job.error()));
        return;
      }
      job_ = std::move(*job);
      pod_ = incoming_.hello().pod();
    } else if (Status status = service_.Dispatch(*job_, pod_, incoming_, Clock::now());
               !status.ok()) {
      log::Warn("coordinator", job_->session.config().name, "rejected a trainer message",
                {{"pod", pod_}, {"error", status.error().ToString()}});
      service_.Close(*job_, pod_, this);
      End(ToGrpc(status.error()));
      return;
    }
    StartRead(&incoming_);
  }

  void OnWriteDone(bool ok) override {
    fulcrum::v1::CoordinatorMessage* next = nullptr;
    std::optional<grpc::Status> finish;
    {
      std::lock_guard lock(mutex_);
      // Not ok: the stream is gone (the read side notices and ends it). Ending: nothing more
      // is written, and the write just done was the last before Finish.
      next = writes_.Written(/*drop_rest=*/!ok || finishing_.has_value());
      if (next == nullptr && finishing_) finish = *finishing_;
    }
    if (finish) {
      Finish(*finish);
    } else if (next != nullptr) {
      StartWrite(next);
    }
  }

  void OnDone() override {
    if (admitted_) service_.ForgetStream(context_);
    const std::shared_ptr<Stream> last_share_of_grpc = std::move(self_);
  }

 private:
  // Ends the stream with `status` once the write in progress (if any) is done.
  void End(grpc::Status status) {
    {
      std::lock_guard lock(mutex_);
      if (finishing_) return;
      finishing_ = std::move(status);
      if (writes_.writing()) return;  // OnWriteDone finishes
    }
    Finish(*finishing_);
  }

  CoordinatorService& service_;
  grpc::CallbackServerContext* const context_;
  std::shared_ptr<Stream> self_;
  bool admitted_ = true;
  fulcrum::v1::TrainerMessage incoming_;  // the reads are sequential: one buffer
  std::shared_ptr<Job> job_;              // after a Hello it accepted
  std::string pod_;
  std::mutex mutex_;
  OrderedWrites<fulcrum::v1::CoordinatorMessage> writes_;
  std::optional<grpc::Status> finishing_;
  bool overflowed_ = false;
};

CoordinatorService::CoordinatorService(CoordinatorLimits limits)
    : limits_(limits), ticker_([this](std::stop_token stop) { TickLoop(stop); }) {}

CoordinatorService::~CoordinatorService() {
  ticker_.request_stop();
}

grpc::ServerBidiReactor<fulcrum::v1::TrainerMessage, fulcrum::v1::CoordinatorMessage>*
CoordinatorService::Session(grpc::CallbackServerContext* context) {
  auto stream = std::make_shared<Stream>(*this, context);
  stream->Begin(stream);
  return stream.get();
}

std::shared_ptr<CoordinatorService::Job> CoordinatorService::FindJob(std::string_view name) const {
  std::shared_lock lock(jobs_mutex_);
  const auto it = jobs_.find(name);
  return it == jobs_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<CoordinatorService::Job>> CoordinatorService::AllJobs() const {
  std::shared_lock lock(jobs_mutex_);
  std::vector<std::shared_ptr<Job>> jobs;
  jobs.reserve(jobs_.size());
  for (const auto& [name, job] : jobs_) jobs.push_back(job);
  return jobs;
}

Status CoordinatorService::AddJob(JobSessionConfig config) {
  // Under the table's lock throughout, so that two registrations of one name cannot race.
  std::unique_lock table(jobs_mutex_);
  const auto existing = jobs_.find(config.name);
  if (existing != jobs_.end()) {
    Job& job = *existing->second;
    std::lock_guard lock(job.mutex);
    if (job.session.config().token == config.token || job.session.membership_generation() > 0) {
      // The same job again (the operator registers it on every reconcile), or an edit:
      // trainers that joined stay, also those still waiting for min_workers.
      return job.session.Reconfigure(std::move(config), Clock::now());
    }
    Result<JobSession> replacement = JobSession::Create(config);
    if (!replacement.ok()) return replacement.error();
    job.session = std::move(*replacement);  // not started, new token: start over
    return Ok();
  }
  Result<JobSession> session = JobSession::Create(config);
  if (!session.ok()) return session.error();
  jobs_.emplace(config.name, std::make_shared<Job>(std::move(*session)));
  log::Info("coordinator", config.name, "job registered",
            {{"global_batch", config.global_batch},
             {"min_workers", config.min_workers},
             {"policy", balancer::ToString(config.policy)}});
  return Ok();
}

void CoordinatorService::SetNodeProductLookup(
    std::function<std::string(const std::string&)> lookup) {
  std::lock_guard lock(lookup_mutex_);
  node_product_ = std::move(lookup);
}

void CoordinatorService::SetStepObserver(std::function<void(const StepCompletion&)> observer) {
  step_observer_ = std::move(observer);
}

void CoordinatorService::SetJobChangeObserver(std::function<void(std::string_view job)> observer) {
  std::lock_guard lock(change_observer_mutex_);
  change_observer_ = std::move(observer);
}

bool CoordinatorService::HasJob(const std::string& name) const {
  return FindJob(name) != nullptr;
}

Status CoordinatorService::RemoveJob(const std::string& name) {
  std::shared_ptr<Job> job;
  {
    std::unique_lock table(jobs_mutex_);
    const auto it = jobs_.find(name);
    if (it == jobs_.end()) return Error{ErrorCode::kNotFound, "no job \"" + name + "\"", "name"};
    job = std::move(it->second);
    jobs_.erase(it);
  }
  std::lock_guard lock(job->mutex);
  job->removed = true;
  for (auto& [pod, stream] : job->streams) stream->Cancel();
  return Ok();
}

Status CoordinatorService::SendControl(const std::string& name, fulcrum::v1::Control::Action action,
                                       const std::string& reason) {
  const std::shared_ptr<Job> job = FindJob(name);
  if (!job) return Error{ErrorCode::kNotFound, "no job \"" + name + "\"", "job"};
  std::lock_guard lock(job->mutex);
  Outbox out;
  job->session.SendControl(action, reason, out);
  Deliver(*job, out);
  return Ok();
}

std::optional<JobSessionSnapshot> CoordinatorService::SnapshotOf(const std::string& name) const {
  const std::shared_ptr<Job> job = FindJob(name);
  if (!job) return std::nullopt;
  std::lock_guard lock(job->mutex);
  return job->session.Snapshot();
}

std::vector<JobSessionSnapshot> CoordinatorService::Snapshot() const {
  std::vector<JobSessionSnapshot> snapshots;
  for (const std::shared_ptr<Job>& job : AllJobs()) {
    std::lock_guard lock(job->mutex);
    snapshots.push_back(job->session.Snapshot());
  }
  return snapshots;
}

void CoordinatorService::Deliver(Job& job, Outbox& out) {
  for (Outgoing& message : out) {
    const auto it = job.streams.find(message.pod);
    if (it != job.streams.end() && !it->second->Push(std::move(message.message))) {
      log::Warn("coordinator", job.session.config().name,
                "a trainer does not read its messages; cancelling its stream",
                {{"pod", message.pod}, {"queued", limits_.max_queued_messages}});
    }
  }
  if (!out.empty()) {
    std::lock_guard lock(change_observer_mutex_);
    if (change_observer_) change_observer_(job.session.config().name);
  }
  out.clear();
}

Status CoordinatorService::AdmitStream(grpc::CallbackServerContext* context) {
  std::lock_guard lock(streams_mutex_);
  if (streams_.size() >= static_cast<std::size_t>(limits_.max_streams)) {
    return Error{ErrorCode::kResourceExhausted,
                 "the coordinator serves " + std::to_string(streams_.size()) +
                     " streams, its limit (max_streams); retry later",
                 "session"};
  }
  streams_[context] = Clock::now() + limits_.hello_timeout;
  return Ok();
}

void CoordinatorService::SaidHello(grpc::CallbackServerContext* context) {
  std::lock_guard lock(streams_mutex_);
  if (const auto it = streams_.find(context); it != streams_.end()) it->second.reset();
}

void CoordinatorService::ForgetStream(grpc::CallbackServerContext* context) {
  std::lock_guard lock(streams_mutex_);
  streams_.erase(context);
}

Result<std::shared_ptr<CoordinatorService::Job>> CoordinatorService::Open(
    const fulcrum::v1::TrainerMessage& first, std::string_view peer_host,
    const std::shared_ptr<Stream>& stream) {
  if (!first.has_hello()) {
    return InvalidArgument("hello", "the first message of a Session must be a Hello");
  }
  const fulcrum::v1::Hello& hello = first.hello();
  if (Status status = ValidateHello(hello); !status.ok()) return status.error();
  std::shared_ptr<Job> job = FindJob(hello.job());
  if (!job) {
    return Error{ErrorCode::kNotFound,
                 "unknown job \"" + hello.job() + "\": check --job / the job's name", "hello.job"};
  }
  fulcrum::v1::Hello joined = hello;
  if (joined.gpu_product().empty() || joined.gpu_product() == "cpu") {
    // A trainer without a GPU of its own to name (a CPU process on an emulated GPU node, or
    // a device that reports nothing): the balancer's prior comes from its node's label. Asked
    // outside the job's lock: the operator's inventory has a lock of its own.
    std::function<std::string(const std::string&)> lookup;
    {
      std::lock_guard lock(lookup_mutex_);
      lookup = node_product_;
    }
    if (lookup) {
      if (std::string product = lookup(joined.node()); !product.empty()) {
        joined.set_gpu_product(product);
      }
    }
  }
  std::lock_guard lock(job->mutex);
  if (job->removed) {
    return Error{ErrorCode::kNotFound, "job \"" + hello.job() + "\" was removed", "hello.job"};
  }
  if (!SameSecret(hello.token(), job->session.config().token)) {
    log::Warn("coordinator", hello.job(), "rejected a trainer with a wrong token",
              {{"pod", hello.pod()}});
    return Error{ErrorCode::kUnauthenticated,
                 "wrong token for job \"" + hello.job() + "\": use the job's token file/Secret",
                 "hello.token"};
  }
  const auto previous = job->streams.find(hello.pod());
  // A reconnect replaces its own stream, so it is not counted twice.
  const auto job_streams = static_cast<int>(job->streams.size());
  if (job_streams >= limits_.max_streams_per_job && previous == job->streams.end()) {
    return Error{ErrorCode::kResourceExhausted,
                 "job \"" + hello.job() + "\" has " + std::to_string(job_streams) +
                     " trainer streams, its limit (max_streams_per_job); retry later",
                 "hello.job"};
  }
  Outbox out;
  if (Status status = job->session.Join(joined, Clock::now(), out, peer_host); !status.ok()) {
    return status.error();
  }
  if (previous != job->streams.end()) {
    previous->second->Cancel();  // a reconnect replaces the stale stream
    previous->second = stream;
  } else {
    job->streams.emplace(hello.pod(), stream);
  }
  Deliver(*job, out);
  return job;
}

Status CoordinatorService::Dispatch(Job& job, const std::string& pod,
                                    const fulcrum::v1::TrainerMessage& message,
                                    Clock::time_point received) {
  std::lock_guard lock(job.mutex);
  if (job.removed) return MakeError(ErrorCode::kNotFound, "the job was removed");
  const auto now = Clock::now();
  const int64_t completed_before = job.session.completed_step();
  Outbox out;
  Status status = Ok();
  switch (message.body_case()) {
    case fulcrum::v1::TrainerMessage::kStepReport:
      status = job.session.Report(pod, message.step_report(), now, out);
      break;
    case fulcrum::v1::TrainerMessage::kHeartbeat:
      status = job.session.Heartbeat(pod, message.heartbeat(), now);
      break;
    case fulcrum::v1::TrainerMessage::kRejoin:
      if (message.rejoin().reason().size() > 4 * kMaxStringBytes) {
        status = InvalidArgument("rejoin.reason", "is too long (1012 bytes at most)");
      } else {
        status = job.session.Rejoin(pod, message.rejoin(), now);
      }
      break;
    case fulcrum::v1::TrainerMessage::kEvaluation:
      status = job.session.Evaluated(pod, message.evaluation(), now);
      break;
    case fulcrum::v1::TrainerMessage::kHello:
      status = InvalidArgument("hello", "a Session says Hello once; open a new stream to rejoin");
      break;
    case fulcrum::v1::TrainerMessage::BODY_NOT_SET:
      status =
          InvalidArgument("body", "empty TrainerMessage: set step_report, heartbeat or rejoin");
      break;
  }
  const std::size_t messages_sent = out.size();
  Deliver(job, out);
  if (step_observer_ && job.session.completed_step() != completed_before) {
    step_observer_(StepCompletion{job.session.config().name, job.session.completed_step(),
                                  messages_sent, Clock::now() - received});
  }
  return status;
}

void CoordinatorService::Close(Job& job, const std::string& pod, const Stream* stream) {
  std::lock_guard lock(job.mutex);
  const auto it = job.streams.find(pod);
  if (it == job.streams.end() || it->second.get() != stream) return;  // replaced by a newer one
  job.streams.erase(it);
  job.session.Disconnect(pod, Clock::now());
}

void CoordinatorService::TickLoop(std::stop_token stop) {
  // Named so that per-thread CPU (top -H, /proc/PID/task/*/comm) tells the coordinator's
  // share of the operator's CPU from the controller's (bench/operator/).
  pthread_setname_np(pthread_self(), "coord-ticker");
  while (!stop.stop_requested()) {
    std::this_thread::sleep_for(kTickPeriod);
    const auto now = Clock::now();
    {
      std::lock_guard lock(streams_mutex_);
      for (auto& [context, hello_deadline] : streams_) {
        if (hello_deadline && now >= *hello_deadline) {
          context->TryCancel();  // its read fails; the stream answers DEADLINE_EXCEEDED
          hello_deadline.reset();
        }
      }
    }
    for (const std::shared_ptr<Job>& job : AllJobs()) {
      std::lock_guard lock(job->mutex);
      Outbox out;
      for (const std::string& pod : job->session.Tick(now, out)) {
        if (auto it = job->streams.find(pod); it != job->streams.end()) it->second->Cancel();
      }
      Deliver(*job, out);
    }
  }
}

Result<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const std::string& listen_address, const std::optional<PemKeyPair>& tls) {
  auto service = std::make_unique<CoordinatorService>();
  auto server = Start(listen_address, *service, tls);
  if (server.ok()) (*server)->owned_service_ = std::move(service);
  return server;
}

void ConfigureCoordinatorServer(grpc::ServerBuilder& builder, const std::string& listen_address,
                                const std::optional<PemKeyPair>& tls, int* port) {
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::shared_ptr<grpc::ServerCredentials> credentials;
  if (tls) {
    grpc::SslServerCredentialsOptions options;
    options.pem_key_cert_pairs.push_back({tls->private_key, tls->certificate});
    credentials = grpc::SslServerCredentials(options);
  } else {
    log::Warn("coordinator", "", "serving without TLS: job tokens cross the network in the clear",
              {{"listen", listen_address}});
    credentials = grpc::InsecureServerCredentials();
  }
  builder.AddListeningPort(listen_address, credentials, port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // Keepalive both ways: the server pings quiet connections (a trainer whose host vanished is
  // noticed in seconds) and accepts the trainers' pings as often as they send them (every 5 s,
  // trainer_image/trainer/membership/coordinator_link.h), instead of closing them as abusive.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
}

Result<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const std::string& listen_address, CoordinatorService& service,
    const std::optional<PemKeyPair>& tls) {
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer());
  server->service_ = &service;
  grpc::ServerBuilder builder;
  ConfigureCoordinatorServer(builder, listen_address, tls, &server->port_);
  builder.RegisterService(server->service_);
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || server->port_ == 0) {
    return InvalidArgument("listen", "cannot listen on \"" + listen_address +
                                         "\": use host:port with a free port (port 0 picks one)");
  }
  return server;
}

void CoordinatorServer::Shutdown() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

CoordinatorServer::~CoordinatorServer() {
  Shutdown();
}

}  // namespace fulcrum::coordinator
