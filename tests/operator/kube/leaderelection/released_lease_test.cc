// What a leader writes to release its Lease, for every shape a Lease may have
// when it reads it back: its own, another's, and one without spec.
#include <gtest/gtest.h>

#include "operator/kube/leaderelection/leader_elector.h"

namespace fulcrum::kube {
namespace {

nlohmann::json Lease(nlohmann::json spec) {
  nlohmann::json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                          {"kind", "Lease"},
                          {"metadata", {{"name", "l"}, {"resourceVersion", "7"}}}};
  if (!spec.is_discarded()) lease["spec"] = std::move(spec);
  return lease;
}

TEST(ReleasedLease, ALeaseWithoutSpecIsNotOursToRelease) {
  EXPECT_EQ(ReleasedLease(Lease(nlohmann::json::value_t::discarded), "me", "t"), std::nullopt);
  EXPECT_EQ(ReleasedLease(Lease(nullptr), "me", "t"), std::nullopt);
  EXPECT_EQ(ReleasedLease(Lease(nlohmann::json::object()), "me", "t"), std::nullopt);
  EXPECT_EQ(ReleasedLease(Lease({{"holderIdentity", nullptr}}), "me", "t"), std::nullopt);
}

TEST(ReleasedLease, AnotherHoldersLeaseIsLeftAlone) {
  EXPECT_EQ(ReleasedLease(Lease({{"holderIdentity", "other"}}), "me", "t"), std::nullopt);
}

TEST(ReleasedLease, OursIsReleasedAsClientGoDoesKeepingTransitionsAndVersion) {
  auto released = ReleasedLease(Lease({{"holderIdentity", "me"},
                                       {"leaseDurationSeconds", 15},
                                       {"leaseTransitions", 3},
                                       {"renewTime", "old"}}),
                                "me", "2026-01-02T15:04:05.000000Z");
  ASSERT_TRUE(released.has_value());
  const nlohmann::json& spec = (*released)["spec"];
  EXPECT_EQ(spec["holderIdentity"], "");
  EXPECT_EQ(spec["leaseDurationSeconds"], 1);
  EXPECT_EQ(spec["leaseTransitions"], 3);
  EXPECT_EQ(spec["renewTime"], "2026-01-02T15:04:05.000000Z");
  EXPECT_EQ(spec["acquireTime"], "2026-01-02T15:04:05.000000Z");
  EXPECT_EQ((*released)["metadata"]["resourceVersion"], "7") << "the update must be conditional";
}

}  // namespace
}  // namespace fulcrum::kube
