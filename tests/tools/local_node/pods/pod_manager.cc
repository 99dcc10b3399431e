#include "tests/tools/local_node/pods/pod_manager.h"

#include <signal.h>

#include <thread>

#include "operator/kube/client/object_meta.h"
#include "tests/tools/local_node/podspec/json_fields.h"
#include "tests/tools/local_node/runtime/container_process.h"
#include "tests/tools/local_node/runtime/state_files.h"

namespace fulcrum::local_node {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool IsTerminal(const nlohmann::json& pod) {
  const std::string phase = StringMember(ObjectMember(pod, "status"), "phase");
  return phase == "Succeeded" || phase == "Failed";
}

// Kills every container an earlier agent started for a pod that is gone.
void KillLeftovers(const fs::path& pod_dir) {
  std::error_code error;
  std::vector<std::unique_ptr<ContainerProcess>> killed;
  for (const auto& container : fs::directory_iterator(pod_dir / "containers", error)) {
    for (const auto& attempt : fs::directory_iterator(container.path(), error)) {
      auto process = ContainerProcess::Adopt(attempt.path());
      if (!process->Running()) continue;
      process->Signal(SIGKILL);
      killed.push_back(std::move(process));
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (auto& process : killed) {
    while (process->Running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(20ms);
  }
}

}  // namespace

PodManager::PodManager(const AgentContext& context, PodIpPool pool)
    : context_(context), pool_(std::move(pool)) {
  reaper_ = std::jthread([this](std::stop_token stop) { ReapFinished(stop); });
}

PodManager::~PodManager() {
  Shutdown();
}

void PodManager::LoadDiskState() {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(context_.work_dir / "pods", error)) {
    auto json = ReadJsonFile(entry.path() / "pod.json");
    std::optional<PodRecord> record;
    if (json.ok() && json->has_value()) record = PodRecord::FromJson(**json);
    if (!record) {
      log_.Warning("ignoring a pod folder without a readable pod.json",
                   {{"folder", entry.path().string()}});
      continue;
    }
    std::lock_guard lock(mutex_);
    if (record->pod_ip != context_.host_ip) pool_.Reserve(record->pod_ip);
    unclaimed_[record->uid] = *record;
  }
  if (!unclaimed_.empty())
    log_.Info("found pods of an earlier agent", {{"pods", unclaimed_.size()}});
}

void PodManager::WatchNode(const std::string& node) {
  kube::InformerOptions options;
  options.reflector.field_selector = "spec.nodeName=" + node;
  // JSON, not protobuf: pod specs are read field by field, and protobuf would add zero values.
  options.reflector.list_encoding = kube::ListEncoding::kJson;
  auto informer =
      std::make_unique<kube::Informer>(context_.client, kube::resources::Pods(), options);
  informer->AddEventHandler({
      .on_add = [this, node](const kube::CachedObject& pod) { OnPod(pod, node); },
      .on_update = [this, node](const kube::CachedObject&,
                                const kube::CachedObject& pod) { OnPod(pod, node); },
      .on_delete = [this](const kube::CachedObject& pod) { OnPodDeleted(pod); },
  });
  informer->Start();
  std::lock_guard lock(mutex_);
  informers_[node] = std::move(informer);
}

bool PodManager::WaitForSync(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<const kube::Informer*> informers;
  {
    // Not held while waiting: the informers' handlers take this lock to deliver the first list.
    std::lock_guard lock(mutex_);
    for (const auto& [node, informer] : informers_) informers.push_back(informer.get());
  }
  for (const kube::Informer* informer : informers) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!informer->WaitForSync(std::max(left, 0ms))) return false;
  }
  return true;
}

void PodManager::RemoveUnclaimed() {
  std::map<std::string, PodRecord> gone;
  {
    std::lock_guard lock(mutex_);
    gone.swap(unclaimed_);
  }
  for (const auto& [uid, record] : gone) {
    log_.Info(
        "an earlier agent's pod is gone from the API: killing what is left of it and removing its "
        "files",
        {{"pod", record.ns + "/" + record.name}, {"uid", uid}});
    KillLeftovers(context_.PodDir(uid));
    std::error_code error;
    fs::remove_all(context_.PodDir(uid), error);
    fs::remove_all(context_.LogDir(record.ns, record.name, uid), error);
    std::lock_guard lock(mutex_);
    pool_.Release(record.pod_ip);
  }
}

void PodManager::OnPod(const kube::CachedObject& object, const std::string& node) {
  nlohmann::json pod = object.ToJson();
  const std::string uid = object.uid();
  std::lock_guard lock(mutex_);
  if (shutting_down_) return;
  if (const auto worker = workers_.find(uid); worker != workers_.end()) {
    worker->second->Update(std::move(pod));
    return;
  }
  if (lost_nodes_.count(node) > 0) return;
  if (const auto adopted = unclaimed_.find(uid); adopted != unclaimed_.end()) {
    PodRecord record = adopted->second;
    unclaimed_.erase(adopted);
    log_.Info("adopting pod", {{"pod", record.ns + "/" + record.name}, {"podIP", record.pod_ip}});
    workers_[uid] =
        std::make_unique<PodWorker>(context_, std::move(record), std::move(pod), /*adopt=*/true);
    return;
  }
  // A pod that already ended (and whose files are gone) has nothing left to run.
  if (IsTerminal(pod)) return;
  PodRecord record{std::string(object.ns()), std::string(object.name()), uid, node, ""};
  const bool host_network = BoolMember(ObjectMember(pod, "spec"), "hostNetwork");
  if (host_network) {
    record.pod_ip = context_.host_ip;
  } else if (auto address = pool_.Allocate()) {
    record.pod_ip = *address;
  } else {
    log_.Error("no free pod address: the --pod-ip-range is used up",
               {{"pod", record.ns + "/" + record.name}});
    return;
  }
  workers_[uid] =
      std::make_unique<PodWorker>(context_, std::move(record), std::move(pod), /*adopt=*/false);
}

void PodManager::OnPodDeleted(const kube::CachedObject& object) {
  std::lock_guard lock(mutex_);
  if (const auto worker = workers_.find(object.uid()); worker != workers_.end())
    worker->second->Deleted();
}

void PodManager::NodeDeleted(const std::string& node) {
  std::lock_guard lock(mutex_);
  lost_nodes_.insert(node);
  for (auto& [uid, worker] : workers_) {
    if (worker->record().node == node) worker->NodeLost();
  }
}

void PodManager::Shutdown() {
  std::map<std::string, std::unique_ptr<kube::Informer>> informers;
  std::map<std::string, std::unique_ptr<PodWorker>> workers;
  {
    std::lock_guard lock(mutex_);
    shutting_down_ = true;
    informers.swap(informers_);
  }
  for (auto& [node, informer] : informers) informer->Stop();
  {
    std::lock_guard lock(mutex_);
    workers.swap(workers_);
  }
  for (auto& [uid, worker] : workers)
    worker->Shutdown();  // all at once: their grace periods overlap
  workers.clear();       // joins each
  reaper_.request_stop();
}

void PodManager::ReapFinished(std::stop_token stop) {
  while (kube::SystemClock()->SleepFor(500ms, stop)) {
    std::vector<std::unique_ptr<PodWorker>> finished;
    {
      std::lock_guard lock(mutex_);
      for (auto it = workers_.begin(); it != workers_.end();) {
        if (!it->second->Finished()) {
          ++it;
          continue;
        }
        if (it->second->record().pod_ip != context_.host_ip)
          pool_.Release(it->second->record().pod_ip);
        finished.push_back(std::move(it->second));
        it = workers_.erase(it);
      }
    }
    finished.clear();  // joins outside the lock
  }
}

Result<LogLocation> PodManager::Find(const LogRequest& request) const {
  std::lock_guard lock(mutex_);
  for (const auto& [uid, worker] : workers_) {
    const PodRecord& record = worker->record();
    if (record.ns == request.ns && record.name == request.pod)
      return worker->FindLog(request.container, request.previous);
  }
  return MakeError(ErrorCode::kNotFound, "pod \"" + request.ns + "/" + request.pod +
                                             "\" is not running on this agent's nodes");
}

}  // namespace fulcrum::local_node
