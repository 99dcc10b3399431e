#include "operator/cmd/fulcrum_operator/coordinator_endpoint.h"

#include "operator/kube/client/resource.h"

namespace fulcrum::operator_main {
namespace {

kube::ResourceType EndpointSlices() {
  return {"discovery.k8s.io", "v1", "endpointslices", true};
}

}  // namespace

CoordinatorEndpoint ParseCoordinatorEndpoint(const std::string& service, const std::string& ip,
                                             int port) {
  const std::size_t slash = service.find('/');
  return {service.substr(0, slash), service.substr(slash + 1), ip, port};
}

nlohmann::json CoordinatorEndpointSlice(const CoordinatorEndpoint& endpoint) {
  const bool ipv6 = endpoint.ip.find(':') != std::string::npos;
  return {
      {"apiVersion", "discovery.k8s.io/v1"},
      {"kind", "EndpointSlice"},
      {"metadata",
       {{"name", endpoint.service_name},
        {"namespace", endpoint.service_namespace},
        {"labels",
         {{"kubernetes.io/service-name", endpoint.service_name},
          {"endpointslice.kubernetes.io/managed-by", "fulcrum-operator"}}}}},
      {"addressType", ipv6 ? "IPv6" : "IPv4"},
      {"endpoints", {{{"addresses", {endpoint.ip}}, {"conditions", {{"ready", true}}}}}},
      {"ports", {{{"name", "grpc"}, {"port", endpoint.port}, {"protocol", "TCP"}}}},
  };
}

Status PublishCoordinatorEndpoint(kube::ApiClient& client, const CoordinatorEndpoint& endpoint) {
  nlohmann::json slice = CoordinatorEndpointSlice(endpoint);
  auto current = client.Get(EndpointSlices(), endpoint.service_namespace, endpoint.service_name);
  if (!current.ok() && current.error().code == ErrorCode::kNotFound) {
    auto created = client.Create(EndpointSlices(), endpoint.service_namespace, slice);
    return created.ok() ? Ok() : Status(created.error());
  }
  if (!current.ok()) return current.error();
  // Replace it whole, guarded by the version read: a rival leader's write in between fails
  // with a conflict and is retried, rather than lost under ours.
  slice["metadata"]["resourceVersion"] = (*current)["metadata"].value("resourceVersion", "");
  auto updated = client.Update(EndpointSlices(), endpoint.service_namespace, slice);
  return updated.ok() ? Ok() : Status(updated.error());
}

}  // namespace fulcrum::operator_main
