#include "tests/tools/local_node/node/emulated_nodes.h"

#include "operator/kube/client/object_meta.h"

namespace fulcrum::local_node {
namespace {

using namespace std::chrono_literals;
// Kubelet renews its Lease every quarter of the 40 s lease duration.
constexpr auto kLeaseRenewInterval = 10s;
// Status is re-posted this often even unchanged (kubelet: 5 min; the Lease is the heartbeat).
constexpr auto kStatusInterval = 60s;

std::string LabelOf(const kube::CachedObject& object, const std::string& key) {
  for (const auto& [name, value] : object.labels()) {
    if (name == key) return value;
  }
  return {};
}

}  // namespace

EmulatedNodes::EmulatedNodes(std::shared_ptr<kube::ApiClient> client, std::vector<NodeSpec> nodes,
                             NodeEndpoint endpoint, SlowdownFiles slowdown_files)
    : client_(std::move(client)),
      nodes_(std::move(nodes)),
      endpoint_(std::move(endpoint)),
      slowdown_files_(std::move(slowdown_files)) {}

EmulatedNodes::~EmulatedNodes() {
  Stop();
}

Status EmulatedNodes::Register() {
  const auto nodes_type = kube::resources::Nodes();
  for (const NodeSpec& node : nodes_) {
    std::string uid;
    std::string slowdown = node.slowdown;
    auto created = client_->Create(nodes_type, "", NodeForRegistration(node, endpoint_, started_));
    if (created.ok()) {
      uid = kube::UidOf(*created);
    } else if (created.error().code == ErrorCode::kAlreadyExists) {
      // Taken over, as kubelet does after a restart: our labels again, except a slowdown
      // someone set on the live node, which stays (a restart must not undo an experiment).
      auto existing = client_->Get(nodes_type, "", node.name);
      if (!existing.ok()) return existing.error();
      uid = kube::UidOf(*existing);
      const auto labels = kube::MetadataOf(*existing).value("labels", nlohmann::json::object());
      if (const auto current = labels.find(kSlowdownLabel);
          current != labels.end() && current->is_string() && ParseSlowdown(*current).ok()) {
        slowdown = *current;
      }
      nlohmann::json labels_patch = node.labels;
      labels_patch[kSlowdownLabel] = slowdown;
      auto patched = client_->Patch(nodes_type, "", node.name, kube::PatchType::kMerge,
                                    {{"metadata", {{"labels", labels_patch}}}});
      if (!patched.ok()) return patched.error();
      log_.Info("took over an existing node", {{"node", node.name}});
    } else {
      return Error{created.error().code,
                   "registering node " + node.name + ": " + created.error().message,
                   created.error().field};
    }
    if (Status written = slowdown_files_.Write(node.name, slowdown); !written.ok()) return written;
    {
      std::lock_guard lock(mutex_);
      live_uids_[node.name] = uid;
      slowdowns_[node.name] = slowdown;
    }
    PostStatus(node);
    RenewLease(node.name, uid);
    log_.Info("node registered", {{"node", node.name},
                                  {"gpuProduct", node.labels.at("nvidia.com/gpu.product")},
                                  {"emulatedSlowdown", slowdown},
                                  {"slowdownFile", slowdown_files_.PathFor(node.name).string()}});
  }
  return Ok();
}

void EmulatedNodes::Start(std::function<void(const std::string& node)> on_deleted) {
  {
    std::lock_guard lock(mutex_);
    on_deleted_ = std::move(on_deleted);
  }
  kube::InformerOptions options;
  options.reflector.label_selector = std::string(kManagedByLabel) + "=" + kManagedByValue;
  informer_ = std::make_unique<kube::Informer>(client_, kube::resources::Nodes(), options);
  informer_->AddEventHandler({
      .on_add = [this](const kube::CachedObject& node) { OnNodeSeen(node); },
      .on_update = [this](const kube::CachedObject&,
                          const kube::CachedObject& node) { OnNodeSeen(node); },
      .on_delete = [this](const kube::CachedObject& node) { OnNodeDeleted(node); },
  });
  informer_->Start();
  heartbeat_thread_ = std::jthread([this](std::stop_token stop) { Heartbeats(stop); });
}

void EmulatedNodes::Stop() {
  if (heartbeat_thread_.joinable()) {
    heartbeat_thread_.request_stop();
    heartbeat_thread_.join();
  }
  if (informer_) informer_->Stop();
}

std::vector<std::string> EmulatedNodes::LiveNodes() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> names;
  for (const auto& [name, uid] : live_uids_) names.push_back(name);
  return names;
}

bool EmulatedNodes::IsLive(const std::string& node) const {
  std::lock_guard lock(mutex_);
  return live_uids_.count(node) > 0;
}

void EmulatedNodes::Heartbeats(std::stop_token stop) {
  auto next_status = std::chrono::steady_clock::now() + kStatusInterval;
  while (kube::SystemClock()->SleepFor(kLeaseRenewInterval, stop)) {
    const bool post_status = std::chrono::steady_clock::now() >= next_status;
    if (post_status) next_status = std::chrono::steady_clock::now() + kStatusInterval;
    for (const NodeSpec& node : nodes_) {
      std::string uid;
      {
        std::lock_guard lock(mutex_);
        const auto live = live_uids_.find(node.name);
        if (live == live_uids_.end()) continue;
        uid = live->second;
      }
      RenewLease(node.name, uid);
      if (post_status) PostStatus(node);
    }
  }
}

void EmulatedNodes::RenewLease(const std::string& node, const std::string& uid) {
  const auto leases = kube::resources::Leases();
  const auto now = std::chrono::system_clock::now();
  auto existing = client_->Get(leases, "kube-node-lease", node);
  Result<nlohmann::json> written = MakeError(ErrorCode::kInternal, "not written");
  if (!existing.ok() && existing.error().code == ErrorCode::kNotFound) {
    written = client_->Create(leases, "kube-node-lease", NodeLease(node, uid, now));
  } else if (existing.ok()) {
    nlohmann::json lease = *existing;
    lease["spec"] = NodeLease(node, uid, now)["spec"];
    written = client_->Update(leases, "kube-node-lease", lease);
  } else {
    written = existing.error();
  }
  if (!written.ok()) {
    log_.Warning("cannot renew the node lease; will retry",
                 {{"node", node}, {"error", written.error().ToString()}});
  }
}

void EmulatedNodes::PostStatus(const NodeSpec& node) {
  auto patched = client_->Patch(
      kube::resources::Nodes(), "", node.name, kube::PatchType::kStrategicMerge,
      {{"status", NodeStatus(node, endpoint_, std::chrono::system_clock::now(), started_)}},
      kube::StatusPatchOptions());
  if (!patched.ok()) {
    log_.Warning("cannot post node status; will retry",
                 {{"node", node.name}, {"error", patched.error().ToString()}});
  }
}

void EmulatedNodes::OnNodeSeen(const kube::CachedObject& object) {
  const std::string node(object.name());
  std::string value = LabelOf(object, kSlowdownLabel);
  if (value.empty()) value = "1";
  {
    std::lock_guard lock(mutex_);
    const auto last = slowdowns_.find(node);
    if (live_uids_.count(node) == 0 || last == slowdowns_.end() || last->second == value) return;
  }
  if (auto parsed = ParseSlowdown(value); !parsed.ok()) {
    log_.Warning("ignoring the node's emulated-slowdown label; keeping the previous value",
                 {{"node", node}, {"error", parsed.error().message}});
    return;
  }
  if (Status written = slowdown_files_.Write(node, value); !written.ok()) {
    log_.Error("cannot write the slowdown file",
               {{"node", node}, {"error", written.error().ToString()}});
    return;
  }
  {
    std::lock_guard lock(mutex_);
    slowdowns_[node] = value;
  }
  log_.Info(
      "emulated slowdown changed (emulation: trainers on this node sleep in proportion to their "
      "compute)",
      {{"node", node}, {"emulatedSlowdown", value}});
}

void EmulatedNodes::OnNodeDeleted(const kube::CachedObject& object) {
  const std::string node(object.name());
  std::function<void(const std::string&)> on_deleted;
  {
    std::lock_guard lock(mutex_);
    if (live_uids_.erase(node) == 0) return;
    on_deleted = on_deleted_;
  }
  log_.Warning(
      "node deleted from the API: its pods' processes are killed and it is no longer kept alive",
      {{"node", node}});
  if (on_deleted) on_deleted(node);
}

}  // namespace fulcrum::local_node
