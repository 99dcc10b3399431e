// Trainers dial one Service for the coordinator, and only the Lease holder serves it. The
// Service has no selector (a selector would send trainers to standby replicas too, which refuse
// them); instead the leader writes the Service's EndpointSlice with its own address each time it
// takes the Lease. A leader that crashed leaves its address behind until the next one
// overwrites it, which is what the trainers' reconnect loop waits for anyway.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/result.h"
#include "operator/kube/client/api_client.h"

namespace fulcrum::operator_main {

struct CoordinatorEndpoint {
  std::string service_namespace;
  std::string service_name;  // the EndpointSlice takes the same name
  std::string ip;            // the leader's pod IP (IPv4 or IPv6)
  int port = 0;
};

// "NAMESPACE/NAME", the address and port to point the Service at. The setting was validated.
CoordinatorEndpoint ParseCoordinatorEndpoint(const std::string& service, const std::string& ip,
                                             int port);

// The EndpointSlice object for `endpoint`: one ready endpoint, port "grpc", labelled with its
// Service (kubernetes.io/service-name) and with us as its manager, so the EndpointSlice
// controllers leave it alone.
nlohmann::json CoordinatorEndpointSlice(const CoordinatorEndpoint& endpoint);

// Creates the slice, or replaces the one there (any leader's) with `endpoint`.
Status PublishCoordinatorEndpoint(kube::ApiClient& client, const CoordinatorEndpoint& endpoint);

}  // namespace fulcrum::operator_main
