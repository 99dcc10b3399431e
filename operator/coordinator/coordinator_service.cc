#include "operator/coordinator/coordinator_service.h"

#include <absl/cleanup/cleanup.h>

#include <chrono>
#include <utility>

#include "common/log.h"

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

// One trainer's outgoing messages, written in order by a thread of its own so a slow reader
// never blocks the coordinator or the other trainers.
class CoordinatorService::Outlet {
 public:
  Outlet(grpc::ServerContext* context,
         grpc::ServerReaderWriter<fulcrum::v1::CoordinatorMessage, fulcrum::v1::TrainerMessage>*
             stream,
         std::size_t max_queued)
      : context_(context),
        max_queued_(max_queued),
        writer_([this, stream](std::stop_token stop) { Run(stop, stream); }) {}

  ~Outlet() {
    {
      std::lock_guard lock(mutex_);  // the writer is either waiting or will see the stop
      writer_.request_stop();
    }
    wake_.notify_all();
  }

  // Queues a message; false when the queue is full, which cancels the stream: its trainer has
  // stopped reading (or reads slower than it is sent to), and must not pin the writer thread
  // or grow the queue. It reconnects and is told where it stands.
  bool Push(fulcrum::v1::CoordinatorMessage message) {
    {
      std::lock_guard lock(mutex_);
      if (queue_.size() >= max_queued_) {
        if (!overflowed_) context_->TryCancel();  // also ends a Write blocked on flow control
        overflowed_ = true;
        return false;
      }
      queue_.push_back(std::move(message));
    }
    wake_.notify_all();
    return true;
  }

  void Cancel() { context_->TryCancel(); }

 private:
  void Run(std::stop_token stop,
           grpc::ServerReaderWriter<fulcrum::v1::CoordinatorMessage, fulcrum::v1::TrainerMessage>*
               stream) {
    while (true) {
      fulcrum::v1::CoordinatorMessage message;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stop.stop_requested() || !queue_.empty(); });
        if (stop.stop_requested()) return;
        message = std::move(queue_.front());
        queue_.pop_front();
      }
      if (!stream->Write(message)) return;  // the stream is gone; the reader will notice
    }
  }

  grpc::ServerContext* context_;
  const std::size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<fulcrum::v1::CoordinatorMessage> queue_;
  bool overflowed_ = false;
  std::jthread writer_;  // last: started after everything it uses exists
};

CoordinatorService::CoordinatorService(CoordinatorLimits limits)
    : limits_(limits), ticker_([this](std::stop_token stop) { TickLoop(stop); }) {}

CoordinatorService::~CoordinatorService() {
  ticker_.request_stop();
}

Status CoordinatorService::AddJob(JobSessionConfig config) {
  std::lock_guard lock(mutex_);
  const auto existing = jobs_.find(config.name);
  if (existing != jobs_.end() && (existing->second.config().token == config.token ||
                                  existing->second.membership_generation() > 0)) {
    // The same job again (the operator registers it on every reconcile), or an edit: trainers
    // that joined stay, also those still waiting for min_workers.
    return existing->second.Reconfigure(std::move(config), Clock::now());
  }
  Result<JobSession> job = JobSession::Create(config);
  if (!job.ok()) return job.error();
  if (existing != jobs_.end()) {  // not started, new token: start over
    existing->second = std::move(*job);
    return Ok();
  }
  jobs_.emplace(config.name, std::move(*job));
  log::Info("coordinator", config.name, "job registered",
            {{"global_batch", config.global_batch},
             {"min_workers", config.min_workers},
             {"policy", balancer::ToString(config.policy)}});
  return Ok();
}

void CoordinatorService::SetNodeProductLookup(
    std::function<std::string(const std::string&)> lookup) {
  std::lock_guard lock(mutex_);
  node_product_ = std::move(lookup);
}

void CoordinatorService::SetStepObserver(std::function<void(const StepCompletion&)> observer) {
  std::lock_guard lock(mutex_);
  step_observer_ = std::move(observer);
}

bool CoordinatorService::HasJob(const std::string& name) const {
  std::lock_guard lock(mutex_);
  return jobs_.contains(name);
}

Status CoordinatorService::RemoveJob(const std::string& name) {
  std::lock_guard lock(mutex_);
  if (jobs_.erase(name) == 0) return Error{ErrorCode::kNotFound, "no job \"" + name + "\"", "name"};
  for (auto& [key, outlet] : sessions_) {
    if (key.job == name) outlet->Cancel();
  }
  return Ok();
}

Status CoordinatorService::SendControl(const std::string& job, fulcrum::v1::Control::Action action,
                                       const std::string& reason) {
  std::lock_guard lock(mutex_);
  const auto it = jobs_.find(job);
  if (it == jobs_.end()) return Error{ErrorCode::kNotFound, "no job \"" + job + "\"", "job"};
  Outbox out;
  it->second.SendControl(action, reason, out);
  Deliver(job, out);
  return Ok();
}

std::optional<JobSessionSnapshot> CoordinatorService::SnapshotOf(const std::string& name) const {
  std::lock_guard lock(mutex_);
  const auto job = jobs_.find(name);
  if (job == jobs_.end()) return std::nullopt;
  return job->second.Snapshot();
}

std::vector<JobSessionSnapshot> CoordinatorService::Snapshot() const {
  std::lock_guard lock(mutex_);
  std::vector<JobSessionSnapshot> snapshots;
  for (const auto& [name, job] : jobs_) snapshots.push_back(job.Snapshot());
  return snapshots;
}

void CoordinatorService::Deliver(const std::string& job, Outbox& out) {
  for (Outgoing& message : out) {
    const auto it = sessions_.find(SessionKey{job, message.pod});
    if (it != sessions_.end() && !it->second->Push(std::move(message.message))) {
      log::Warn("coordinator", job, "a trainer does not read its messages; cancelling its stream",
                {{"pod", message.pod}, {"queued", limits_.max_queued_messages}});
    }
  }
  out.clear();
}

Status CoordinatorService::AdmitStream(grpc::ServerContext* context) {
  std::lock_guard lock(mutex_);
  if (streams_.size() >= static_cast<std::size_t>(limits_.max_streams)) {
    return Error{ErrorCode::kResourceExhausted,
                 "the coordinator serves " + std::to_string(streams_.size()) +
                     " streams, its limit (max_streams); retry later",
                 "session"};
  }
  streams_[context] = Clock::now() + limits_.hello_timeout;
  return Ok();
}

void CoordinatorService::ForgetStream(grpc::ServerContext* context) {
  std::lock_guard lock(mutex_);
  streams_.erase(context);
}

Result<CoordinatorService::SessionKey> CoordinatorService::Open(
    const fulcrum::v1::TrainerMessage& first, std::string_view peer_host,
    const std::shared_ptr<Outlet>& outlet) {
  if (!first.has_hello()) {
    return InvalidArgument("hello", "the first message of a Session must be a Hello");
  }
  const fulcrum::v1::Hello& hello = first.hello();
  if (Status status = ValidateHello(hello); !status.ok()) return status.error();
  std::lock_guard lock(mutex_);
  const auto job = jobs_.find(hello.job());
  if (job == jobs_.end()) {
    return Error{ErrorCode::kNotFound,
                 "unknown job \"" + hello.job() + "\": check --job / the job's name", "hello.job"};
  }
  if (!SameSecret(hello.token(), job->second.config().token)) {
    log::Warn("coordinator", hello.job(), "rejected a trainer with a wrong token",
              {{"pod", hello.pod()}});
    return Error{ErrorCode::kUnauthenticated,
                 "wrong token for job \"" + hello.job() + "\": use the job's token file/Secret",
                 "hello.token"};
  }
  SessionKey key{hello.job(), hello.pod()};
  int job_streams = 0;  // sessions_ is ordered by job first: the job's streams are one range
  for (auto it = sessions_.lower_bound(SessionKey{hello.job(), ""});
       it != sessions_.end() && it->first.job == hello.job(); ++it) {
    ++job_streams;
  }
  // A reconnect replaces its own stream, so it is not counted twice.
  if (job_streams >= limits_.max_streams_per_job && !sessions_.contains(key)) {
    return Error{ErrorCode::kResourceExhausted,
                 "job \"" + hello.job() + "\" has " + std::to_string(job_streams) +
                     " trainer streams, its limit (max_streams_per_job); retry later",
                 "hello.job"};
  }
  Outbox out;
  fulcrum::v1::Hello joined = hello;
  if ((joined.gpu_product().empty() || joined.gpu_product() == "cpu") && node_product_) {
    // A trainer without a GPU of its own to name (a CPU process on an emulated GPU node, or
    // a device that reports nothing): the balancer's prior comes from its node's label.
    if (std::string product = node_product_(joined.node()); !product.empty()) {
      joined.set_gpu_product(product);
    }
  }
  if (Status status = job->second.Join(joined, Clock::now(), out, peer_host); !status.ok()) {
    return status.error();
  }
  if (auto previous = sessions_.find(key); previous != sessions_.end()) {
    previous->second->Cancel();  // a reconnect replaces the stale stream
  }
  sessions_[key] = outlet;
  Deliver(key.job, out);
  return key;
}

Status CoordinatorService::Dispatch(const SessionKey& key,
                                    const fulcrum::v1::TrainerMessage& message,
                                    Clock::time_point received) {
  std::lock_guard lock(mutex_);
  const auto job = jobs_.find(key.job);
  if (job == jobs_.end()) return MakeError(ErrorCode::kNotFound, "the job was removed");
  const auto now = Clock::now();
  const int64_t completed_before = job->second.completed_step();
  Outbox out;
  Status status = Ok();
  switch (message.body_case()) {
    case fulcrum::v1::TrainerMessage::kStepReport:
      status = job->second.Report(key.pod, message.step_report(), now, out);
      break;
    case fulcrum::v1::TrainerMessage::kHeartbeat:
      status = job->second.Heartbeat(key.pod, message.heartbeat(), now);
      break;
    case fulcrum::v1::TrainerMessage::kRejoin:
      if (message.rejoin().reason().size() > 4 * kMaxStringBytes) {
        status = InvalidArgument("rejoin.reason", "is too long (1012 bytes at most)");
      } else {
        status = job->second.Rejoin(key.pod, message.rejoin(), now);
      }
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
  Deliver(key.job, out);
  if (step_observer_ && job->second.completed_step() != completed_before) {
    step_observer_(StepCompletion{key.job, job->second.completed_step(), messages_sent,
                                  Clock::now() - received});
  }
  return status;
}

void CoordinatorService::Close(const SessionKey& key, const std::shared_ptr<Outlet>& outlet) {
  std::lock_guard lock(mutex_);
  const auto it = sessions_.find(key);
  if (it == sessions_.end() || it->second != outlet) return;  // replaced by a newer stream
  sessions_.erase(it);
  const auto job = jobs_.find(key.job);
  if (job != jobs_.end()) job->second.Disconnect(key.pod, Clock::now());
}

grpc::Status CoordinatorService::Session(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<fulcrum::v1::CoordinatorMessage, fulcrum::v1::TrainerMessage>*
        stream) {
  if (Status admitted = AdmitStream(context); !admitted.ok()) return ToGrpc(admitted.error());
  const absl::Cleanup forget = [this, context] { ForgetStream(context); };
  fulcrum::v1::TrainerMessage message;
  const bool said_something = stream->Read(&message);
  {
    std::lock_guard lock(mutex_);
    streams_[context].reset();  // the Hello deadline no longer applies
  }
  if (!said_something) {
    if (context->IsCancelled()) {  // by TickLoop, or by the client; either way it is gone
      log::Warn("coordinator", "", "closed a stream that sent no Hello in time",
                {{"peer", context->peer()}, {"hello_timeout_ms", limits_.hello_timeout.count()}});
      return {grpc::StatusCode::DEADLINE_EXCEEDED,
              "no Hello within " + std::to_string(limits_.hello_timeout.count()) +
                  " ms of opening the stream"};
    }
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "no Hello: the stream ended, or its first message was not a valid TrainerMessage"};
  }
  auto outlet = std::make_shared<Outlet>(context, stream, limits_.max_queued_messages);
  Result<SessionKey> key = Open(message, PeerHost(context->peer()), outlet);
  if (!key.ok()) return ToGrpc(key.error());
  grpc::Status result = grpc::Status::OK;
  while (stream->Read(&message)) {
    if (Status status = Dispatch(*key, message, Clock::now()); !status.ok()) {
      log::Warn("coordinator", key->job, "rejected a trainer message",
                {{"pod", key->pod}, {"error", status.error().ToString()}});
      result = ToGrpc(status.error());
      break;
    }
  }
  Close(*key, outlet);
  return result;
}

void CoordinatorService::TickLoop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    std::this_thread::sleep_for(kTickPeriod);
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    for (auto& [context, hello_deadline] : streams_) {
      if (hello_deadline && now >= *hello_deadline) {
        context->TryCancel();  // its Read returns; Session answers DEADLINE_EXCEEDED
        hello_deadline.reset();
      }
    }
    for (auto& [name, job] : jobs_) {
      Outbox out;
      for (const std::string& pod : job.Tick(now, out)) {
        if (auto it = sessions_.find(SessionKey{name, pod}); it != sessions_.end()) {
          it->second->Cancel();
        }
      }
      Deliver(name, out);
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
  // trainer_image/trainer/coordinator_link.h), instead of closing them as abusive.
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
