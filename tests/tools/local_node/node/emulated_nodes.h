// Keeps the inventory's nodes alive in the API as kubelet keeps its node:
// registers each Node (or takes over an existing one, keeping its current
// slowdown label), renews its Lease in kube-node-lease every 10 s and re-posts
// its status every minute. Watches the Nodes to pass slowdown-label changes to
// the slowdown files and to learn of deleted nodes, which it stops keeping
// alive (a deleted node is a lost node; restart the agent to register it again).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "operator/kube/client/api_client.h"
#include "operator/kube/cache/informer.h"
#include "tests/tools/local_node/node/inventory.h"
#include "tests/tools/local_node/node/node_objects.h"
#include "tests/tools/local_node/node/slowdown_files.h"

namespace fulcrum::local_node {

class EmulatedNodes {
 public:
  EmulatedNodes(std::shared_ptr<kube::ApiClient> client, std::vector<NodeSpec> nodes,
                NodeEndpoint endpoint, SlowdownFiles slowdown_files);
  ~EmulatedNodes();  // stops

  // Creates or takes over every Node and writes its slowdown file. An error
  // names the node; nothing is kept alive then.
  Status Register();
  // Starts the heartbeats and the Node watch. `on_deleted` runs on the watch's thread.
  void Start(std::function<void(const std::string& node)> on_deleted);
  void Stop();

  // The nodes still alive (registered and not deleted since).
  std::vector<std::string> LiveNodes() const;
  bool IsLive(const std::string& node) const;

 private:
  void Heartbeats(std::stop_token stop);
  void RenewLease(const std::string& node, const std::string& uid);
  void PostStatus(const NodeSpec& node);
  void OnNodeSeen(const kube::CachedObject& object);
  void OnNodeDeleted(const kube::CachedObject& object);

  std::shared_ptr<kube::ApiClient> client_;
  std::vector<NodeSpec> nodes_;
  NodeEndpoint endpoint_;
  SlowdownFiles slowdown_files_;
  std::chrono::system_clock::time_point started_ = std::chrono::system_clock::now();
  log::Logger log_{"local-node.nodes"};

  mutable std::mutex mutex_;
  std::map<std::string, std::string> live_uids_;  // node name -> uid while alive
  std::map<std::string, std::string> slowdowns_;  // node name -> last written value
  std::function<void(const std::string&)> on_deleted_;

  std::unique_ptr<kube::Informer> informer_;
  std::jthread heartbeat_thread_;
};

}  // namespace fulcrum::local_node
