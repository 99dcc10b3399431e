// One pod on one emulated node, from its first sight to its deletion: kubelet's
// pod worker. A thread runs a level-triggered sync whenever something changes
// (a newer pod object, a container ending, a deadline): it prepares the pod's
// address and volumes, starts containers through shims, restarts them as
// restartPolicy says with crash-loop back-off, runs readiness probes, stops
// them on deletion (SIGTERM, then SIGKILL after the grace period, then deletes
// the object with grace 0 as kubelet does), and writes the pod's status when it
// changed. A restarted agent adopts the containers its predecessor started.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "tests/tools/local_node/logs/log_server.h"
#include "tests/tools/local_node/pods/agent_context.h"
#include "tests/tools/local_node/pods/pod_status.h"
#include "tests/tools/local_node/pods/probe.h"
#include "tests/tools/local_node/podspec/volumes.h"
#include "tests/tools/local_node/runtime/container_process.h"

namespace fulcrum::local_node {

// What the agent keeps on disk about a pod it runs (pod.json), to find it again after a restart.
struct PodRecord {
  std::string ns;
  std::string name;
  std::string uid;
  std::string node;
  std::string pod_ip;

  nlohmann::json ToJson() const;
  static std::optional<PodRecord> FromJson(const nlohmann::json& json);
};

class PodWorker {
 public:
  // Starts the worker's thread. `adopt`: containers started by an earlier agent
  // are read from the pod's folder instead of being started afresh.
  PodWorker(const AgentContext& context, PodRecord record, nlohmann::json pod, bool adopt);
  ~PodWorker();  // Shutdown() unless finished, then joins
  PodWorker(const PodWorker&) = delete;
  PodWorker& operator=(const PodWorker&) = delete;

  void Update(nlohmann::json pod);  // a newer version of the pod object
  void Deleted();                   // the object is gone: stop at once, remove its files, finish
  void NodeLost();  // the node was deleted: kill now, report, wait for the object to go
  void Shutdown();  // the agent stops: stop containers (bounded), report, keep files
  bool Finished() const { return finished_.load(); }
  const PodRecord& record() const { return record_; }

  // For the log server: where a container's current or previous log is.
  Result<LogLocation> FindLog(const std::string& container, bool previous) const;

 private:
  enum class Mode { kRunning, kTerminating, kDeleted, kNodeLost, kShutdown };
  struct Container;
  using Clock = std::chrono::steady_clock;

  void Run(std::stop_token stop);
  // One pass over the world; returns when to look again at the latest.
  Clock::time_point Sync();
  Clock::time_point SyncStopping(Mode mode, Clock::time_point now);
  Clock::time_point SyncRunning(Clock::time_point now);
  void NoticeExits();
  bool PrepareSandbox(Clock::time_point now);
  void StartContainer(Container& container, Clock::time_point now);
  void RecordStartFailure(Container& container, int attempt, const std::string& message);
  void ProbeReadiness(Container& container, Clock::time_point now);
  void ScheduleRestart(Container& container, Clock::time_point now);
  std::vector<std::string> BaseEnvironment() const;
  PodView View(bool terminal) const;
  bool WriteStatus(bool terminal);
  void Adopt();
  void RemoveFiles();
  void Wake();
  nlohmann::json CurrentPod() const;  // a copy of the latest object
  void PublishLogs(const Container& container);
  void RecordEvent(bool warning, const std::string& reason, const std::string& note);

  const AgentContext& context_;
  const PodRecord record_;
  const std::filesystem::path pod_dir_;
  log::Logger log_;

  // Inputs from other threads.
  mutable std::mutex inputs_mutex_;
  nlohmann::json pod_;  // the latest object
  Mode requested_ = Mode::kRunning;
  int wake_fd_ = -1;  // an eventfd: the sync loop polls it beside the shims' pidfds

  // The sync thread's own state.
  std::vector<std::unique_ptr<Container>> containers_;
  std::vector<PreparedVolume> volumes_;
  bool sandbox_ready_ = false;
  Clock::time_point volumes_refresh_at_{};
  std::string failure_reason_, failure_message_;
  nlohmann::json last_written_status_;
  bool terminal_written_ = false;
  bool stop_signalled_ = false;
  Clock::time_point stop_started_{};  // the first SIGTERM
  Clock::time_point kill_at_{};
  bool delete_sent_ = false;
  bool adopt_ = false;

  // What the log server may read, guarded apart from the sync state.
  struct LogEntry {
    int attempt = -1;  // the latest start's number; -1 before the first start
    std::string waiting_reason = "ContainerCreating";
    std::shared_ptr<std::atomic<bool>> writing;
  };
  mutable std::mutex logs_mutex_;
  std::map<std::string, LogEntry> logs_;

  std::atomic<bool> finished_{false};
  std::jthread thread_;  // last: it uses everything above
};

}  // namespace fulcrum::local_node
