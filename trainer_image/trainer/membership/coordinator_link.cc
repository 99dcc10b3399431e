#include "trainer_image/trainer/membership/coordinator_link.h"

#include <pthread.h>
#include <sched.h>

#include <cstring>

#include "common/backoff.h"
#include "common/log.h"

namespace fulcrum::trainer {
namespace {

// 100 ms doubling up to 2 s, each wait between 3/4 and 5/4 of that, so that the trainers of a
// job that all lost the coordinator at once do not all come back at once. The cap holds for the
// jittered wait too (as for every user of BackoffPolicy): at the cap a wait is 1.5 to 2 s, where
// this loop's own doubling once allowed up to 2.5 s.
constexpr BackoffPolicy kReconnect{.initial = std::chrono::milliseconds(100),
                                   .max = std::chrono::milliseconds(2000),
                                   .jitter_low = 0.75,
                                   .jitter_high = 1.25};
constexpr int kMaxMessageBytes = 64 * 1024;  // the protocol's limit
constexpr std::size_t kMaxQueued = 1024;     // reports are best effort; drop the oldest

// Statuses that no retry can fix: a wrong token, a message we built wrong. NOT_FOUND (the
// coordinator does not know the job yet: an operator that just started registers its jobs once
// its caches sync) and RESOURCE_EXHAUSTED (briefly overloaded) pass: the trainer retries.
bool Permanent(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAUTHENTICATED || code == grpc::StatusCode::INVALID_ARGUMENT ||
         code == grpc::StatusCode::PERMISSION_DENIED;
}

// Why a retry is worth it, for the log line that says the trainer waits.
std::string RetryReason(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::NOT_FOUND:
      return "the coordinator does not know this job yet (the operator registers it once its "
             "caches "
             "sync); retrying";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "the coordinator is overloaded; retrying";
    default:
      return "coordinator stream closed; reconnecting";
  }
}

ErrorCode ToErrorCode(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAUTHENTICATED:
      return ErrorCode::kUnauthenticated;
    case grpc::StatusCode::NOT_FOUND:
      return ErrorCode::kNotFound;
    case grpc::StatusCode::PERMISSION_DENIED:
      return ErrorCode::kPermissionDenied;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return ErrorCode::kResourceExhausted;
    default:
      return ErrorCode::kInvalidArgument;
  }
}

}  // namespace

CoordinatorLink::CoordinatorLink(CoordinatorLinkOptions options) : options_(std::move(options)) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(kMaxMessageBytes);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(options_.keepalive_time.count()));
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                   static_cast<int>(options_.keepalive_timeout.count()));
  arguments.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  arguments.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // ping however quiet the stream is
  arguments.SetMaxSendMessageSize(kMaxMessageBytes);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options_.root_certificates.empty()) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = options_.root_certificates;
    credentials = grpc::SslCredentials(tls);
  }
  channel_ = grpc::CreateCustomChannel(options_.address, credentials, arguments);
  stub_ = fulcrum::v1::Coordinator::NewStub(channel_);
  session_ = std::jthread([this](std::stop_token stop) { SessionLoop(stop); });
  heartbeat_ = std::jthread([this](std::stop_token stop) { HeartbeatLoop(stop); });
  writer_ = std::jthread([this](std::stop_token stop) { WriterLoop(stop); });
}

CoordinatorLink::~CoordinatorLink() {
  {
    std::lock_guard lock(mutex_);
    heartbeat_.request_stop();
    session_.request_stop();
    writer_.request_stop();
    if (context_ != nullptr) context_->TryCancel();
  }
  changed_.notify_all();
  queued_.notify_all();
}

void CoordinatorLink::SessionLoop(std::stop_token stop) {
  Backoff backoff(kReconnect);
  while (!stop.stop_requested()) {
    grpc::ClientContext context;
    auto stream = stub_->Session(&context);
    fulcrum::v1::TrainerMessage hello;
    *hello.mutable_hello() = options_.hello;
    std::optional<fulcrum::v1::Rejoin> rejoin;
    {
      std::lock_guard lock(mutex_);
      hello.mutable_hello()->set_step(step_);
      hello.mutable_hello()->set_generation(generation_);
      rejoin = pending_rejoin_;
      context_ = &context;
    }
    if (stop.stop_requested()) context.TryCancel();
    bool opened;
    {
      // The Hello goes first on every stream: the writer thread sees the stream only once the
      // Hello (and a pending Rejoin) is written, and never writes beside it.
      std::lock_guard write_lock(write_mutex_);
      opened = stream->Write(hello);
      if (opened && rejoin) {
        fulcrum::v1::TrainerMessage message;
        *message.mutable_rejoin() = *rejoin;
        opened = stream->Write(message);
      }
      std::lock_guard lock(mutex_);
      if (opened) stream_ = stream.get();
    }
    if (opened) {
      fulcrum::v1::CoordinatorMessage message;
      while (stream->Read(&message)) {
        backoff.Reset();
        Receive(message);
      }
    }
    {
      std::scoped_lock lock(write_mutex_, mutex_);
      context_ = nullptr;
      stream_ = nullptr;
    }
    const grpc::Status status = stream->Finish();
    if (stop.stop_requested()) return;
    if (Permanent(status.error_code())) {
      log::Error(
          "trainer", options_.hello.job(), "the coordinator refused this trainer",
          {{"code", static_cast<int>(status.error_code())}, {"error", status.error_message()}});
      std::lock_guard lock(mutex_);
      fatal_ = Error{ToErrorCode(status.error_code()), status.error_message(), "coordinator"};
      changed_.notify_all();
      return;
    }
    const std::chrono::milliseconds wait = backoff.Next();
    log::Warn("trainer", options_.hello.job(), RetryReason(status.error_code()),
              {{"code", static_cast<int>(status.error_code())},
               {"error", status.error_message()},
               {"backoff_ms", wait.count()}});
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, wait, [&] { return stop.stop_requested(); });
  }
}

// Any message shows the coordinator this trainer is alive, so a heartbeat goes out only after
// a period in which nothing else was queued: a training trainer's step reports usually do.
void CoordinatorLink::HeartbeatLoop(std::stop_token stop) {
  while (true) {
    fulcrum::v1::TrainerMessage message;
    {
      std::unique_lock lock(mutex_);
      const auto due = last_queued_ + options_.heartbeat_period;
      changed_.wait_until(lock, due, [&] { return stop.stop_requested(); });
      if (stop.stop_requested()) return;
      if (std::chrono::steady_clock::now() < last_queued_ + options_.heartbeat_period) continue;
      message.mutable_heartbeat()->set_generation(generation_);
    }
    Send(message);
  }
}

void CoordinatorLink::Receive(const fulcrum::v1::CoordinatorMessage& message) {
  std::lock_guard lock(mutex_);
  if (message.has_assignment()) {
    const fulcrum::v1::Assignment& assignment = message.assignment();
    assignments_[assignment.generation()].push_back(assignment);
    if (pending_rejoin_ && assignment.generation() > pending_rejoin_->generation()) {
      pending_rejoin_.reset();
    }
    // Older generations can no longer start; keep memory bounded.
    while (assignments_.size() > 2) assignments_.erase(assignments_.begin());
    auto& updates = assignments_[assignment.generation()];
    if (updates.size() > 64) updates.erase(updates.begin() + 1, updates.begin() + 33);
  } else if (message.has_control()) {
    controls_.push_back(message.control());
  }
  changed_.notify_all();
}

void CoordinatorLink::Send(fulcrum::v1::TrainerMessage message) {
  {
    std::lock_guard lock(mutex_);
    if (outgoing_.size() >= kMaxQueued) outgoing_.pop_front();
    outgoing_.push_back(std::move(message));
    last_queued_ = std::chrono::steady_clock::now();
  }
  // Only the writer waits for the queue. Waking every waiter on changed_ (the heartbeat and
  // abandon watchers too) cost the training thread, which sends a report every step, a
  // context switch per waiter, and on a busy machine the CPU for milliseconds.
  queued_.notify_one();
}

void CoordinatorLink::WriterLoop(std::stop_token stop) {
  // SCHED_BATCH: a woken batch thread never preempts the thread that woke it (the kernel's
  // wakeup preemption skips it). Without it, the training thread's notify per step handed its
  // core to this thread at once, on a busy machine for the whole gRPC write: the trainer
  // waited 0.2-1.3 ms a step on average (median 20 µs) inside Report, 1.3% of a 16x16 step
  // (docs/benchmarks.md). Now the report goes out on an idle core, or when the training thread
  // next waits (its all-reduce), a few ms later at most; plans are applied steps ahead.
  const sched_param batch{.sched_priority = 0};
  if (const int failed = pthread_setschedparam(pthread_self(), SCHED_BATCH, &batch); failed != 0) {
    log::Warn("trainer", options_.hello.job(), "cannot make the report writer SCHED_BATCH",
              {{"error", std::strerror(failed)}});
  }
  while (true) {
    fulcrum::v1::TrainerMessage message;
    {
      std::unique_lock lock(mutex_);
      queued_.wait(lock, [&] { return stop.stop_requested() || !outgoing_.empty(); });
      if (stop.stop_requested()) return;
      message = std::move(outgoing_.front());
      outgoing_.pop_front();
      writing_ = true;
    }
    std::lock_guard write_lock(write_mutex_);
    grpc::ClientReaderWriter<fulcrum::v1::TrainerMessage, fulcrum::v1::CoordinatorMessage>* stream;
    {
      std::lock_guard lock(mutex_);
      stream = stream_;
    }
    if (stream != nullptr) stream->Write(message);  // dropped while disconnected
    {
      std::lock_guard lock(mutex_);
      writing_ = false;
    }
    changed_.notify_all();  // Flush
  }
}

std::optional<fulcrum::v1::Assignment> CoordinatorLink::WaitForGeneration(
    int64_t after, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  auto newer = [&] {
    return fatal_.has_value() || !controls_.empty() ||
           (!assignments_.empty() && assignments_.rbegin()->first > after);
  };
  changed_.wait_for(lock, timeout, newer);
  if (assignments_.empty() || assignments_.rbegin()->first <= after) return std::nullopt;
  return assignments_.rbegin()->second.front();
}

bool CoordinatorLink::HasNewerGeneration(int64_t generation) {
  std::lock_guard lock(mutex_);
  return !assignments_.empty() && assignments_.rbegin()->first > generation;
}

fulcrum::v1::Assignment CoordinatorLink::PlanAt(const fulcrum::v1::Assignment& base, int64_t step) {
  std::lock_guard lock(mutex_);
  const auto it = assignments_.find(base.generation());
  if (it == assignments_.end()) return base;
  const fulcrum::v1::Assignment* best = &base;
  for (const fulcrum::v1::Assignment& update : it->second) {
    if (update.apply_at_step() <= step && update.apply_at_step() >= best->apply_at_step()) {
      best = &update;
    }
  }
  return *best;
}

std::optional<fulcrum::v1::Control> CoordinatorLink::TakeControl() {
  std::lock_guard lock(mutex_);
  if (controls_.empty()) return std::nullopt;
  fulcrum::v1::Control control = controls_.front();
  controls_.pop_front();
  return control;
}

std::optional<Error> CoordinatorLink::Fatal() {
  std::lock_guard lock(mutex_);
  return fatal_;
}

void CoordinatorLink::Report(const fulcrum::v1::StepReport& report) {
  fulcrum::v1::TrainerMessage message;
  *message.mutable_step_report() = report;
  Send(message);  // best effort: training goes on without the coordinator
}

void CoordinatorLink::ReportEvaluation(const fulcrum::v1::Evaluation& evaluation) {
  fulcrum::v1::TrainerMessage message;
  *message.mutable_evaluation() = evaluation;
  Send(message);
}

void CoordinatorLink::Flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return outgoing_.empty() && !writing_; });
}

bool CoordinatorLink::RequestRejoin(int64_t generation, const std::string& reason) {
  fulcrum::v1::TrainerMessage message;
  message.mutable_rejoin()->set_generation(generation);
  message.mutable_rejoin()->set_reason(reason.substr(0, 1000));
  {
    std::lock_guard lock(mutex_);
    pending_rejoin_ = message.rejoin();
  }
  Send(message);
  return true;  // if the stream is down, the reconnect's Hello forms a new generation anyway
}

bool CoordinatorLink::WaitForAbandon(int64_t generation, std::stop_token stop) {
  // Declared before the lock, so that it is destroyed after the lock is released: its callback
  // takes mutex_ (to wake the wait without a lost notification).
  std::stop_callback wake(stop, [this] {
    std::lock_guard lock(mutex_);
    changed_.notify_all();
  });
  std::unique_lock lock(mutex_);
  auto abandon = [&] {
    for (auto it = assignments_.upper_bound(generation); it != assignments_.end(); ++it) {
      for (const fulcrum::v1::Assignment& assignment : it->second) {
        if (assignment.abandon_previous()) return true;
      }
    }
    return false;
  };
  changed_.wait(lock, [&] { return stop.stop_requested() || abandon(); });
  return !stop.stop_requested();
}

void CoordinatorLink::SetProgress(int64_t generation, int64_t step) {
  std::lock_guard lock(mutex_);
  generation_ = generation;
  step_ = step;
}

}  // namespace fulcrum::trainer
