#include "operator/cmd/fulcrum_operator/coordinator_endpoint.h"

#include <gtest/gtest.h>

namespace fulcrum::operator_main {
namespace {

TEST(CoordinatorEndpoint, TheSliceBelongsToTheServiceAndHoldsTheLeaderAsItsOneReadyEndpoint) {
  const CoordinatorEndpoint endpoint =
      ParseCoordinatorEndpoint("fulcrum-system/fulcrum-coordinator", "10.4.2.7", 7070);
  EXPECT_EQ(endpoint.service_namespace, "fulcrum-system");
  EXPECT_EQ(endpoint.service_name, "fulcrum-coordinator");
  const nlohmann::json slice = CoordinatorEndpointSlice(endpoint);
  EXPECT_EQ(slice["metadata"]["name"], "fulcrum-coordinator");
  EXPECT_EQ(slice["metadata"]["namespace"], "fulcrum-system");
  // The Service finds its slices by this label; the managed-by label keeps Kubernetes' own
  // EndpointSlice controllers from claiming or deleting it.
  EXPECT_EQ(slice["metadata"]["labels"]["kubernetes.io/service-name"], "fulcrum-coordinator");
  EXPECT_EQ(slice["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
            "fulcrum-operator");
  EXPECT_EQ(slice["addressType"], "IPv4");
  ASSERT_EQ(slice["endpoints"].size(), 1u);
  EXPECT_EQ(slice["endpoints"][0]["addresses"], nlohmann::json::array({"10.4.2.7"}));
  EXPECT_EQ(slice["endpoints"][0]["conditions"]["ready"], true);
  // The Service's port is named grpc; the slice's port must carry the same name to match it.
  EXPECT_EQ(slice["ports"][0]["name"], "grpc");
  EXPECT_EQ(slice["ports"][0]["port"], 7070);
}

TEST(CoordinatorEndpoint, AnIpv6LeaderGetsAnIpv6Slice) {
  const nlohmann::json slice =
      CoordinatorEndpointSlice(ParseCoordinatorEndpoint("ns/svc", "fd00::17", 7070));
  EXPECT_EQ(slice["addressType"], "IPv6");
}

}  // namespace
}  // namespace fulcrum::operator_main
