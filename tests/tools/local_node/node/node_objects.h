// The API objects that stand for an emulated node, as kubelet writes them
// (pkg/kubelet/kubelet_node_status.go, nodestatus/setters.go): the Node on
// registration, its status on every heartbeat, and its Lease in kube-node-lease.
// Pure: times and addresses come in as arguments.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/tools/local_node/node/inventory.h"

namespace fulcrum::local_node {

struct NodeEndpoint {
  std::string address;   // InternalIP of every node (the agent's log server listens there)
  int kubelet_port = 0;  // daemonEndpoints.kubeletEndpoint.Port
};

// The Node object to create: labels, the volumes annotation, and a full status.
nlohmann::json NodeForRegistration(const NodeSpec& node, const NodeEndpoint& endpoint,
                                   std::chrono::system_clock::time_point now);
// The Node's status as of `now`: Ready with sufficient memory/disk/PID, capacity
// and allocatable, addresses, daemon endpoint, node info. `transition` is when
// the conditions last changed (the agent's start).
nlohmann::json NodeStatus(const NodeSpec& node, const NodeEndpoint& endpoint,
                          std::chrono::system_clock::time_point now,
                          std::chrono::system_clock::time_point transition);
// The node's Lease (coordination.k8s.io/v1), renewed at `now`, owned by the Node.
nlohmann::json NodeLease(const std::string& node_name, const std::string& node_uid,
                         std::chrono::system_clock::time_point now);

}  // namespace fulcrum::local_node
