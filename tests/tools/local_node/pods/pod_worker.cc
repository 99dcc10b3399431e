#include "tests/tools/local_node/pods/pod_worker.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "common/rfc3339.h"
#include "operator/kube/client/object_meta.h"
#include "tests/tools/local_node/podspec/container_environment.h"
#include "tests/tools/local_node/podspec/json_fields.h"
#include "tests/tools/local_node/runtime/command_lookup.h"
#include "tests/tools/local_node/runtime/state_files.h"

namespace fulcrum::local_node {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Volumes are rewritten this often, so secret and configMap volumes follow their objects.
constexpr auto kVolumeRefresh = 60s;
// A start that failed for want of something in the API (a Secret, a ConfigMap) is retried this
// often.
constexpr auto kConfigRetry = 5s;
// A status write the API refused is tried again after this.
constexpr auto kStatusRetry = 2s;
// A pod deleted outright (grace 0, or gone while the agent was down) gets this long after SIGTERM.
constexpr auto kDeletedGrace = 2s;

std::string Now() {
  return FormatRfc3339(std::chrono::system_clock::now());
}

std::string RestartPolicyOf(const nlohmann::json& pod) {
  const std::string policy = StringMember(ObjectMember(pod, "spec"), "restartPolicy");
  return policy.empty() ? "Always" : policy;
}

bool HasDeletionTimestamp(const nlohmann::json& pod) {
  const auto& metadata = kube::MetadataOf(pod);
  return metadata.contains("deletionTimestamp") && !metadata["deletionTimestamp"].is_null();
}

std::chrono::seconds DeletionGrace(const nlohmann::json& pod) {
  const auto& metadata = kube::MetadataOf(pod);
  const auto found = metadata.find("deletionGracePeriodSeconds");
  if (found != metadata.end() && found->is_number_integer())
    return std::chrono::seconds(std::max(0, found->get<int>()));
  return std::chrono::seconds(
      IntegerMember(ObjectMember(pod, "spec"), "terminationGracePeriodSeconds").value_or(30));
}

std::string PhaseOf(const nlohmann::json& pod) {
  return StringMember(ObjectMember(pod, "status"), "phase");
}

std::vector<int> Attempts(const fs::path& container_dir) {
  std::vector<int> attempts;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(container_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.empty() && std::all_of(name.begin(), name.end(), ::isdigit))
      attempts.push_back(std::stoi(name));
  }
  std::sort(attempts.begin(), attempts.end());
  return attempts;
}

}  // namespace

struct PodWorker::Container {
  int index = 0;
  std::string name;
  nlohmann::json spec;
  int attempt = -1;  // the latest start's number, which is the restart count
  std::unique_ptr<ContainerProcess> process;
  std::optional<ContainerExit> last_exit;      // how the latest start ended
  std::optional<ContainerExit> previous_exit;  // how the one before ended
  Clock::time_point started{};                 // when the latest start began (this agent's clock)
  std::string waiting_reason = "ContainerCreating";
  std::string waiting_message;
  Clock::time_point start_at{};  // start (again) no earlier than this
  bool restart_scheduled = false;
  bool done = false;  // ended, and restartPolicy says it stays so
  RestartBackoff backoff;
  std::optional<ReadinessSchedule> readiness;
  bool ready = false;
  std::vector<std::string> env;  // the latest start's environment (exec probes)
  std::string working_dir;
  std::shared_ptr<std::atomic<bool>> writing = std::make_shared<std::atomic<bool>>(false);

  bool running() const { return process != nullptr && !last_exit.has_value(); }
  std::string id() const { return "fulcrum-local-node://" + name + "-" + std::to_string(attempt); }
};

nlohmann::json PodRecord::ToJson() const {
  return {{"namespace", ns}, {"name", name}, {"uid", uid}, {"node", node}, {"podIP", pod_ip}};
}

std::optional<PodRecord> PodRecord::FromJson(const nlohmann::json& json) {
  if (!json.is_object()) return std::nullopt;
  PodRecord record;
  record.ns = StringMember(json, "namespace");
  record.name = StringMember(json, "name");
  record.uid = StringMember(json, "uid");
  record.node = StringMember(json, "node");
  record.pod_ip = StringMember(json, "podIP");
  if (record.name.empty() || record.uid.empty() || record.node.empty()) return std::nullopt;
  return record;
}

PodWorker::PodWorker(const AgentContext& context, PodRecord record, nlohmann::json pod, bool adopt)
    : context_(context),
      record_(std::move(record)),
      pod_dir_(context.PodDir(record_.uid)),
      log_("local-node.pod", record_.ns + "/" + record_.name),
      pod_(std::move(pod)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      adopt_(adopt) {
  const nlohmann::json& containers = ArrayMember(ObjectMember(pod_, "spec"), "containers");
  for (std::size_t i = 0; i < containers.size(); ++i) {
    auto container = std::make_unique<Container>();
    container->index = static_cast<int>(i);
    container->name = StringMember(containers[i], "name");
    container->spec = containers[i];
    container->backoff = RestartBackoff(context_.restart_backoff);
    logs_[container->name] = LogEntry{-1, "ContainerCreating", container->writing};
    containers_.push_back(std::move(container));
  }
  thread_ = std::jthread([this](std::stop_token stop) { Run(stop); });
}

PodWorker::~PodWorker() {
  if (!finished_) Shutdown();
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

nlohmann::json PodWorker::CurrentPod() const {
  std::lock_guard lock(inputs_mutex_);
  return pod_;
}

void PodWorker::Wake() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(wake_fd_, &one, sizeof one);
}

void PodWorker::Update(nlohmann::json pod) {
  {
    std::lock_guard lock(inputs_mutex_);
    pod_ = std::move(pod);
  }
  Wake();
}

void PodWorker::Deleted() {
  {
    std::lock_guard lock(inputs_mutex_);
    requested_ = Mode::kDeleted;
  }
  Wake();
}

void PodWorker::NodeLost() {
  {
    std::lock_guard lock(inputs_mutex_);
    if (requested_ == Mode::kRunning) requested_ = Mode::kNodeLost;
  }
  Wake();
}

void PodWorker::Shutdown() {
  {
    std::lock_guard lock(inputs_mutex_);
    if (requested_ != Mode::kDeleted) requested_ = Mode::kShutdown;
  }
  Wake();
}

void PodWorker::Run(std::stop_token stop) {
  std::error_code error;
  fs::create_directories(pod_dir_, error);
  if (adopt_) {
    Adopt();
  } else if (Status written = WriteJsonFile(pod_dir_ / "pod.json", record_.ToJson());
             !written.ok()) {
    log_.Error("cannot record the pod on disk", {{"error", written.error().ToString()}});
  }
  while (!stop.stop_requested() && !finished_) {
    const Clock::time_point next = Sync();
    if (finished_) break;
    // Sleep until the deadline, a wake-up (new object, deletion, shutdown) or a shim's end.
    std::vector<pollfd> waits{{wake_fd_, POLLIN, 0}};
    bool exit_unnoticed = false;  // ended before the sync could see it: look again at once
    for (const auto& container : containers_) {
      if (!container->running()) continue;
      if (container->process->wait_fd() >= 0) {
        waits.push_back({container->process->wait_fd(), POLLIN, 0});
      } else {
        exit_unnoticed = true;
      }
    }
    const auto timeout =
        exit_unnoticed ? std::chrono::milliseconds(0)
                       : std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
    ::poll(waits.data(), waits.size(),
           static_cast<int>(std::clamp<long long>(timeout.count(), 0, 60'000)));
    std::uint64_t drained;
    [[maybe_unused]] const ssize_t read = ::read(wake_fd_, &drained, sizeof drained);
  }
  finished_ = true;
}

PodWorker::Clock::time_point PodWorker::Sync() {
  const Clock::time_point now = Clock::now();
  NoticeExits();
  Mode mode;
  nlohmann::json pod;
  {
    std::lock_guard lock(inputs_mutex_);
    mode = requested_;
    pod = pod_;
  }
  if (mode == Mode::kRunning && HasDeletionTimestamp(pod)) mode = Mode::kTerminating;
  if (mode != Mode::kRunning) return SyncStopping(mode, now);
  return SyncRunning(now);
}

void PodWorker::NoticeExits() {
  for (auto& container : containers_) {
    if (!container->running() || container->process->Running()) continue;
    container->last_exit = container->process->exit();
    container->writing->store(false);
    container->ready = false;
    container->readiness.reset();
    const ContainerExit& exit = *container->last_exit;
    log_.Info("container ended", {{"container", container->name},
                                  {"exitCode", exit.exit_code},
                                  {"reason", exit.reason},
                                  {"restartCount", container->attempt}});
  }
}

PodWorker::Clock::time_point PodWorker::SyncStopping(Mode mode, Clock::time_point now) {
  const nlohmann::json pod = CurrentPod();
  bool any_running = false;
  for (const auto& container : containers_) any_running = any_running || container->running();
  if (any_running) {
    std::chrono::seconds grace = DeletionGrace(pod);
    if (mode == Mode::kDeleted) grace = std::min<std::chrono::seconds>(grace, kDeletedGrace);
    if (mode == Mode::kShutdown) grace = std::min(grace, context_.shutdown_grace);
    if (mode == Mode::kNodeLost) grace = 0s;
    if (stop_signalled_) {
      // A shorter grace since the stop began (a second delete, a force delete, a lost node)
      // takes over, counted from the first SIGTERM, as kubelet shortens a running kill.
      kill_at_ = std::min(kill_at_, stop_started_ + grace);
    } else {
      kill_at_ = now + grace;
      stop_started_ = now;
      stop_signalled_ = true;
      for (auto& container : containers_) {
        if (!container->running()) continue;
        log_.Info("stopping container",
                  {{"container", container->name}, {"gracePeriodSeconds", grace.count()}});
        if (mode == Mode::kTerminating)
          RecordEvent(false, "Killing", "Stopping container " + container->name);
        container->process->Signal(grace.count() > 0 ? SIGTERM : SIGKILL);
      }
    }
    if (now >= kill_at_) {
      for (auto& container : containers_) {
        if (container->running()) container->process->Signal(SIGKILL);
      }
      return now + 100ms;
    }
    return kill_at_;
  }
  switch (mode) {
    case Mode::kTerminating:
      // All stopped: report the terminal phase, then remove the object as kubelet does.
      if (!terminal_written_ && !WriteStatus(/*terminal=*/true)) return now + kStatusRetry;
      if (!delete_sent_) {
        kube::DeleteOptions options;
        options.grace_period_seconds = 0;
        options.precondition_uid = record_.uid;
        const Status deleted =
            context_.client->Delete(kube::resources::Pods(), record_.ns, record_.name, options);
        if (!deleted.ok() && deleted.error().code != ErrorCode::kNotFound &&
            deleted.error().code != ErrorCode::kConflict) {
          log_.Warning("cannot delete the stopped pod; will retry",
                       {{"error", deleted.error().ToString()}});
          return now + kStatusRetry;
        }
        delete_sent_ = true;
      }
      return now + 60s;  // the object's DELETED event comes next: Deleted()
    case Mode::kNodeLost:
      if (!terminal_written_ && !WriteStatus(/*terminal=*/true)) return now + kStatusRetry;
      return now + 60s;  // the pod garbage collector removes the object: Deleted()
    case Mode::kShutdown:
      // Best effort: a truthful status before the agent goes; the files stay for the next agent.
      if (!terminal_written_) WriteStatus(/*terminal=*/false);
      finished_ = true;
      return now;
    case Mode::kDeleted:
      RemoveFiles();
      finished_ = true;
      return now;
    case Mode::kRunning:
      break;
  }
  return now + 60s;
}

PodWorker::Clock::time_point PodWorker::SyncRunning(Clock::time_point now) {
  const nlohmann::json pod = CurrentPod();
  const std::string api_phase = PhaseOf(pod);
  bool anything_started = false;
  for (const auto& container : containers_)
    anything_started = anything_started || container->attempt >= 0;
  // A pod never leaves Succeeded or Failed; one that is already there (the agent's files
  // are gone, say) is not started again.
  if (terminal_written_ ||
      ((api_phase == "Succeeded" || api_phase == "Failed") && !anything_started)) {
    return now + 60s;
  }
  Clock::time_point next = now + kVolumeRefresh;
  if (failure_reason_.empty() && (!sandbox_ready_ || now >= volumes_refresh_at_)) {
    if (!PrepareSandbox(now)) next = std::min(next, now + kConfigRetry);
  }
  if (failure_reason_.empty() && sandbox_ready_) {
    const std::string policy = RestartPolicyOf(pod);
    for (auto& container : containers_) {
      if (container->running()) {
        ProbeReadiness(*container, now);
        if (container->readiness) next = std::min(next, container->readiness->next());
        continue;
      }
      if (container->done) continue;
      if (container->last_exit) {
        const bool restart =
            policy == "Always" || (policy == "OnFailure" && container->last_exit->exit_code != 0);
        if (!restart) {
          container->done = true;
          continue;
        }
        if (!container->restart_scheduled) ScheduleRestart(*container, now);
      }
      if (now >= container->start_at) StartContainer(*container, Clock::now());
      if (!container->running() && !container->done) {
        if (container->last_exit && !container->restart_scheduled) {
          // It ended at once (a failed start): decide about it on the next pass.
          next = now;
        } else {
          next = std::min(next, container->start_at);
        }
      }
      if (container->readiness) next = std::min(next, container->readiness->next());
    }
  }
  if (!WriteStatus(/*terminal=*/false)) next = std::min(next, now + kStatusRetry);
  return next;
}

bool PodWorker::PrepareSandbox(Clock::time_point now) {
  const nlohmann::json pod = CurrentPod();
  if (!ArrayMember(ObjectMember(pod, "spec"), "initContainers").empty()) {
    failure_reason_ = "InitContainersNotSupported";
    failure_message_ =
        "spec.initContainers: init containers are not supported by fulcrum-local-node; "
        "run the setup in the main container's command";
    RecordEvent(true, "FailedCreatePodSandBox", failure_message_);
    return false;
  }
  auto volumes = PrepareVolumes(pod, PodRuntimeFacts{record_.pod_ip, context_.host_ip},
                                *context_.references, pod_dir_);
  if (!volumes.ok()) {
    const Error& error = volumes.error();
    if (error.code == ErrorCode::kInvalidArgument) {
      // The agent can never run this pod: fail it, as kubelet fails a pod it cannot admit.
      failure_reason_ = "FailedMount";
      failure_message_ = error.message;
      log_.Error("the pod cannot run here", {{"error", error.ToString()}});
    } else {
      for (auto& container : containers_) {
        if (container->attempt < 0) container->waiting_message = error.message;
      }
      log_.Warning("volumes not ready; will retry", {{"error", error.ToString()}});
    }
    RecordEvent(true, "FailedMount", error.message);
    return false;
  }
  volumes_ = std::move(volumes).value();
  sandbox_ready_ = true;
  volumes_refresh_at_ = now + kVolumeRefresh;
  return true;
}

std::vector<std::string> PodWorker::BaseEnvironment() const {
  std::string path;
  for (const auto& dir : context_.search_dirs) path += dir.string() + ":";
  path += context_.path_variable;
  const char* home = std::getenv("HOME");
  const std::string host = context_.apiserver_host, port = context_.apiserver_port;
  return {
      "PATH=" + path,
      "HOME=" + std::string(home != nullptr ? home : "/root"),
      "HOSTNAME=" + record_.name,
      "KUBERNETES_SERVICE_HOST=" + host,
      "KUBERNETES_SERVICE_PORT=" + port,
      "KUBERNETES_SERVICE_PORT_HTTPS=" + port,
      "KUBERNETES_PORT=tcp://" + host + ":" + port,
      "FULCRUM_SLOWDOWN_FILE=" + context_.slowdown_files.PathFor(record_.node).string(),
  };
}

void PodWorker::RecordStartFailure(Container& container, int attempt, const std::string& message) {
  ContainerExit exit;
  exit.exit_code = 128;
  exit.reason = "StartError";
  exit.message = message;
  exit.finished_at = Now();
  const fs::path state_dir = pod_dir_ / "containers" / container.name / std::to_string(attempt);
  std::error_code error;
  fs::create_directories(state_dir, error);
  [[maybe_unused]] const Status written =
      WriteJsonFile(state_dir / state_file::kExit, ToJson(exit));
  container.previous_exit = container.last_exit;
  container.last_exit = exit;
  container.attempt = attempt;
  container.process.reset();
  container.restart_scheduled = false;
  container.started = Clock::now();
  PublishLogs(container);
  log_.Error("container could not start", {{"container", container.name}, {"message", message}});
  RecordEvent(true, "Failed", "Error: " + message);
}

void PodWorker::StartContainer(Container& container, Clock::time_point now) {
  const nlohmann::json pod = CurrentPod();
  const std::string field = "spec.containers[" + std::to_string(container.index) + "]";
  std::vector<EnvVar> base;
  for (const std::string& entry : BaseEnvironment()) {
    const auto eq = entry.find('=');
    base.push_back({entry.substr(0, eq), entry.substr(eq + 1)});
  }
  auto env = BuildContainerEnvironment(pod, container.spec, field,
                                       PodRuntimeFacts{record_.pod_ip, context_.host_ip},
                                       *context_.references, base);
  const auto config_error = [&](const std::string& message) {
    container.waiting_reason = "CreateContainerConfigError";
    container.waiting_message = message;
    container.start_at = now + kConfigRetry;
    container.restart_scheduled = true;  // a retry of the same start, not a restart
    PublishLogs(container);
    log_.Warning("container config error; will retry",
                 {{"container", container.name}, {"message", message}});
    RecordEvent(true, "Failed", "Error: " + message);
  };
  if (!env.ok()) return config_error(env.error().message);
  auto mounts = ContainerMounts(container.spec, field, volumes_, *env);
  if (!mounts.ok()) return config_error(mounts.error().message);

  const int attempt = container.attempt + 1;
  const CommandLine command_line = ExpandCommandAndArgs(container.spec, *env);
  std::vector<std::string> argv = command_line.command;
  if (argv.empty()) argv.push_back(ImageEntrypoint(StringMember(container.spec, "image")));
  argv.insert(argv.end(), command_line.args.begin(), command_line.args.end());
  auto program = FindProgram(argv[0], context_.search_dirs, context_.path_variable);
  if (!program.ok()) return RecordStartFailure(container, attempt, program.error().message);
  argv[0] = program->string();

  ContainerSpec spec;
  spec.argv = argv;
  for (const EnvVar& var : *env) spec.env.push_back(var.name + "=" + var.value);
  spec.mounts = *mounts;
  spec.working_dir = StringMember(container.spec, "workingDir");
  if (spec.working_dir.empty()) spec.working_dir = (pod_dir_ / "workdir").string();
  const fs::path log_dir = context_.LogDir(record_.ns, record_.name, record_.uid) / container.name;
  spec.log_file = (log_dir / (std::to_string(attempt) + ".log")).string();
  spec.message_from_log_on_error =
      StringMember(container.spec, "terminationMessagePolicy") == "FallbackToLogsOnError";
  const fs::path state_dir = pod_dir_ / "containers" / container.name / std::to_string(attempt);
  std::error_code error;
  fs::remove_all(state_dir, error);
  fs::create_directories(state_dir, error);
  fs::create_directories(log_dir, error);
  fs::create_directories(pod_dir_ / "workdir", error);

  auto process = ContainerProcess::Launch(context_.shim_command, state_dir, spec);
  if (!process.ok()) return config_error(process.error().message);
  container.previous_exit = container.last_exit;
  container.last_exit.reset();
  container.process = std::move(process).value();
  container.attempt = attempt;
  container.started = Clock::now();
  container.restart_scheduled = false;
  container.env = spec.env;
  container.working_dir = spec.working_dir;
  container.waiting_message.clear();
  if (!container.process->Running() && container.process->exit()->reason == "StartError") {
    container.last_exit = container.process->exit();
    PublishLogs(container);
    log_.Error("container could not start",
               {{"container", container.name}, {"message", container.last_exit->message}});
    RecordEvent(true, "Failed", "Error: " + container.last_exit->message);
    return;
  }
  // It ran (it may have ended already: NoticeExits records that on the next pass).
  container.writing->store(true);
  if (container.spec.contains("readinessProbe") && container.spec["readinessProbe"].is_object()) {
    container.readiness.emplace(container.spec["readinessProbe"], container.started);
  }
  container.ready = !container.readiness.has_value();
  PublishLogs(container);
  // Only the latest two starts are kept (current and previous): a crash loop must not fill the
  // disk.
  for (int old : Attempts(pod_dir_ / "containers" / container.name)) {
    if (old >= attempt - 1) continue;
    fs::remove_all(pod_dir_ / "containers" / container.name / std::to_string(old), error);
    fs::remove(log_dir / (std::to_string(old) + ".log"), error);
  }
  log_.Info("container started", {{"container", container.name},
                                  {"pid", container.process->container_pid()},
                                  {"podIP", record_.pod_ip},
                                  {"restartCount", attempt},
                                  {"command", argv}});
  RecordEvent(false, "Started", "Started container " + container.name);
}

void PodWorker::ScheduleRestart(Container& container, Clock::time_point now) {
  const auto ran_for =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - container.started);
  const auto delay = container.backoff.NextDelay(ran_for);
  container.start_at = now + delay;
  container.restart_scheduled = true;
  if (delay.count() > 0) {
    container.waiting_reason = "CrashLoopBackOff";
    container.waiting_message = "back-off " + std::to_string(delay.count() / 1000) +
                                "s restarting failed container=" + container.name +
                                " pod=" + record_.name + "_" + record_.ns + "(" + record_.uid + ")";
    RecordEvent(true, "BackOff", "Back-off restarting failed container " + container.name);
  }
}

void PodWorker::ProbeReadiness(Container& container, Clock::time_point now) {
  if (!container.readiness || !container.readiness->Due(now)) return;
  ProbeContext probe_context;
  probe_context.pod_ip = record_.pod_ip;
  probe_context.shim_pid = container.process->shim_pid();
  probe_context.env = container.env;
  probe_context.working_dir = container.working_dir;
  probe_context.container = container.spec;
  probe_context.search_dirs = context_.search_dirs;
  probe_context.path_variable = context_.path_variable;
  const ProbeOutcome outcome = RunProbe(container.spec["readinessProbe"], probe_context);
  const bool was_ready = container.readiness->ready();
  container.readiness->Record(outcome.success, Clock::now());
  container.ready = container.readiness->ready();
  if (!outcome.success) {
    log_.Debug("readiness probe failed",
               {{"container", container.name}, {"message", outcome.message}});
    if (was_ready || container.readiness->ready() == false) {
      RecordEvent(true, "Unhealthy", "Readiness probe failed: " + outcome.message);
    }
  }
}

PodView PodWorker::View(bool terminal) const {
  const nlohmann::json pod = CurrentPod();
  PodView view;
  view.restart_policy = RestartPolicyOf(pod);
  view.pod_ip = record_.pod_ip;
  view.host_ip = context_.host_ip;
  view.sandbox_ready = sandbox_ready_;
  view.terminal = terminal;
  view.failure_reason = failure_reason_;
  view.failure_message = failure_message_;
  for (const auto& container : containers_) {
    ContainerView out;
    out.name = container->name;
    out.image = StringMember(container->spec, "image");
    out.restart_count = std::max(0, container->attempt);
    if (container->attempt >= 0) out.container_id = container->id();
    if (!failure_reason_.empty() && container->attempt < 0) {
      out.state = ContainerView::State::kTerminated;
      ContainerExit never;
      never.exit_code = 128;
      never.reason = "ContainerCannotRun";
      never.message = failure_message_;
      out.terminated = never;
    } else if (container->running()) {
      out.state = ContainerView::State::kRunning;
      out.started_at = container->process->started_at();
      out.ready = container->ready;
      out.last_termination = container->previous_exit;
    } else if (container->last_exit) {
      if (!container->done && !terminal && container->restart_scheduled) {
        out.state = ContainerView::State::kWaiting;
        out.waiting_reason = container->waiting_reason;
        out.waiting_message = container->waiting_message;
        out.last_termination = container->last_exit;
      } else {
        out.state = ContainerView::State::kTerminated;
        out.terminated = container->last_exit;
        out.last_termination = container->previous_exit;
      }
    } else {
      out.state = ContainerView::State::kWaiting;
      out.waiting_reason = container->waiting_reason;
      out.waiting_message = container->waiting_message;
    }
    view.containers.push_back(std::move(out));
  }
  return view;
}

bool PodWorker::WriteStatus(bool terminal) {
  nlohmann::json previous;
  {
    std::lock_guard lock(inputs_mutex_);
    previous = ObjectMember(pod_, "status");
  }
  const PodView view = View(terminal);
  nlohmann::json status = BuildPodStatus(view, previous, Now());
  const std::string phase = StringMember(status, "phase");
  const bool is_terminal = phase == "Succeeded" || phase == "Failed";
  // Conditions carry times; compare without them, so an unchanged pod is not rewritten.
  const auto comparable = [](nlohmann::json value) {
    for (auto& condition : value["conditions"]) condition.erase("lastTransitionTime");
    value.erase("startTime");
    return value;
  };
  if (!last_written_status_.is_null() && comparable(status) == comparable(last_written_status_)) {
    if (is_terminal) terminal_written_ = true;
    return true;
  }
  const nlohmann::json patch = {{"metadata", {{"uid", record_.uid}}}, {"status", status}};
  auto written =
      context_.client->Patch(kube::resources::Pods(), record_.ns, record_.name,
                             kube::PatchType::kStrategicMerge, patch, kube::StatusPatchOptions());
  if (!written.ok()) {
    if (written.error().code == ErrorCode::kNotFound)
      return true;  // gone: the DELETED event follows
    log_.Warning("cannot write pod status; will retry", {{"error", written.error().ToString()}});
    return false;
  }
  if (StringMember(last_written_status_, "phase") != phase) {
    log_.Info("pod phase", {{"phase", phase}, {"podIP", record_.pod_ip}, {"node", record_.node}});
  }
  last_written_status_ = status;
  {
    // Later statuses are computed against what the API now holds.
    std::lock_guard lock(inputs_mutex_);
    pod_["status"] = written->contains("status") ? (*written)["status"] : status;
  }
  if (is_terminal) terminal_written_ = true;
  return true;
}

void PodWorker::Adopt() {
  for (auto& container : containers_) {
    const fs::path dir = pod_dir_ / "containers" / container->name;
    const std::vector<int> attempts = Attempts(dir);
    if (attempts.empty()) continue;
    const int latest = attempts.back();
    container->attempt = latest;
    container->process = ContainerProcess::Adopt(dir / std::to_string(latest));
    container->started = Clock::now();
    if (container->process->Running()) {
      container->writing->store(true);
      if (container->spec.contains("readinessProbe") &&
          container->spec["readinessProbe"].is_object()) {
        container->readiness.emplace(container->spec["readinessProbe"], Clock::now());
      }
      container->ready = !container->readiness.has_value();
      if (auto spec = ReadJsonFile(dir / std::to_string(latest) / state_file::kSpec);
          spec.ok() && spec->has_value()) {
        if (auto parsed = ContainerSpecFromJson(**spec); parsed.ok()) {
          container->env = parsed->env;
          container->working_dir = parsed->working_dir;
        }
      }
    } else {
      container->last_exit = container->process->exit();
    }
    if (latest > 0) {
      auto previous = ReadJsonFile(dir / std::to_string(latest - 1) / state_file::kExit);
      if (previous.ok() && previous->has_value())
        container->previous_exit = ContainerExitFromJson(**previous);
    }
    PublishLogs(*container);
    log_.Info("adopted container", {{"container", container->name},
                                    {"restartCount", latest},
                                    {"running", container->running()},
                                    {"pid", container->process->container_pid()}});
  }
  sandbox_ready_ = false;  // volumes are rewritten (their files are still there) on the first pass
}

void PodWorker::RemoveFiles() {
  std::error_code error;
  fs::remove_all(pod_dir_, error);
  fs::remove_all(context_.LogDir(record_.ns, record_.name, record_.uid), error);
  log_.Info("pod removed; its files are gone", {{"uid", record_.uid}});
}

void PodWorker::PublishLogs(const Container& container) {
  std::lock_guard lock(logs_mutex_);
  LogEntry& entry = logs_[container.name];
  entry.attempt = container.attempt;
  entry.waiting_reason = container.waiting_reason;
  entry.writing = container.writing;
}

Result<LogLocation> PodWorker::FindLog(const std::string& container, bool previous) const {
  std::lock_guard lock(logs_mutex_);
  const auto found = logs_.find(container);
  if (found == logs_.end()) {
    return MakeError(ErrorCode::kNotFound,
                     "container \"" + container + "\" not found in pod \"" + record_.name + "\"");
  }
  const LogEntry& entry = found->second;
  const fs::path dir = context_.LogDir(record_.ns, record_.name, record_.uid) / container;
  if (previous) {
    if (entry.attempt < 1) {
      return MakeError(ErrorCode::kInvalidArgument, "previous terminated container \"" + container +
                                                        "\" in pod \"" + record_.name +
                                                        "\" not found");
    }
    return LogLocation{dir / (std::to_string(entry.attempt - 1) + ".log"), [] { return false; }};
  }
  if (entry.attempt < 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "container \"" + container + "\" in pod \"" + record_.name +
                         "\" is waiting to start: " + entry.waiting_reason);
  }
  auto writing = entry.writing;
  return LogLocation{dir / (std::to_string(entry.attempt) + ".log"),
                     [writing] { return writing->load(); }};
}

void PodWorker::RecordEvent(bool warning, const std::string& reason, const std::string& note) {
  if (!context_.events) return;
  nlohmann::json pod = CurrentPod();
  pod["kind"] = "Pod";
  pod["apiVersion"] = "v1";
  context_.events->Record(pod, warning ? kube::EventType::kWarning : kube::EventType::kNormal,
                          reason, reason, note);
}

}  // namespace fulcrum::local_node
