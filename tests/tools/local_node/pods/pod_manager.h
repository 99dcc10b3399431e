// All pods of the agent's nodes: watches the pods bound to each node (one
// informer per node, field selector spec.nodeName, as kubelet does), gives
// each new pod an address and a PodWorker, hands updates and deletions to it,
// and answers the log server. On start it reads what an earlier agent left in
// the work folder: pods the API still has are adopted with their running
// containers; the rest are killed and their files removed.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "common/log.h"
#include "operator/kube/cache/informer.h"
#include "tests/tools/local_node/logs/log_server.h"
#include "tests/tools/local_node/pods/agent_context.h"
#include "tests/tools/local_node/pods/pod_ip_pool.h"
#include "tests/tools/local_node/pods/pod_worker.h"

namespace fulcrum::local_node {

class PodManager final : public LogDirectory {
 public:
  PodManager(const AgentContext& context, PodIpPool pool);
  ~PodManager() override;  // Shutdown()

  // Reads the pods an earlier agent ran (their addresses stay theirs). Before WatchNode.
  void LoadDiskState();
  void WatchNode(const std::string& node);
  bool WaitForSync(std::chrono::milliseconds timeout) const;
  // After WaitForSync: pods on disk the API no longer has are killed and removed.
  void RemoveUnclaimed();
  void NodeDeleted(const std::string& node);
  // Stops watching, then stops every pod's containers (bounded by the context's
  // shutdown grace) and writes their last status. Files stay for the next agent.
  void Shutdown();

  Result<LogLocation> Find(const LogRequest& request) const override;

 private:
  void OnPod(const kube::CachedObject& object, const std::string& node);
  void OnPodDeleted(const kube::CachedObject& object);
  void ReapFinished(std::stop_token stop);

  const AgentContext& context_;
  log::Logger log_{"local-node.pods"};
  mutable std::mutex mutex_;
  PodIpPool pool_;
  std::map<std::string, std::unique_ptr<PodWorker>> workers_;  // by pod uid
  std::map<std::string, PodRecord> unclaimed_;                 // on disk, not yet seen in the API
  std::set<std::string> lost_nodes_;
  bool shutting_down_ = false;
  std::map<std::string, std::unique_ptr<kube::Informer>> informers_;  // by node
  std::jthread reaper_;
};

}  // namespace fulcrum::local_node
