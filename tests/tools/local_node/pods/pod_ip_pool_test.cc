#include "tests/tools/local_node/pods/pod_ip_pool.h"

#include <gtest/gtest.h>

namespace fulcrum::local_node {
namespace {

TEST(PodIpPool, HandsOutDistinctLoopbackAddressesAndReusesReleasedOnes) {
  auto pool = PodIpPool::Create("127.77.0.0/16");
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(pool->Allocate(), "127.77.0.1");
  EXPECT_EQ(pool->Allocate(), "127.77.0.2");
  pool->Release("127.77.0.1");
  EXPECT_EQ(pool->Allocate(), "127.77.0.1");
}

TEST(PodIpPool, ReservedAddressesOfAdoptedPodsAreNotHandedOut) {
  auto pool = PodIpPool::Create("127.77.0.0/16");
  ASSERT_TRUE(pool.ok());
  EXPECT_TRUE(pool->Reserve("127.77.0.1"));
  EXPECT_FALSE(pool->Reserve("10.0.0.1"));
  EXPECT_EQ(pool->Allocate(), "127.77.0.2");
}

TEST(PodIpPool, SkipsAddressesEndingInZeroOr255AndRunsOut) {
  auto pool = PodIpPool::Create("127.5.0.0/23");  // 127.5.0.0 - 127.5.1.255
  ASSERT_TRUE(pool.ok());
  int handed_out = 0;
  while (auto address = pool->Allocate()) {
    EXPECT_NE(address->substr(address->rfind('.')), ".0");
    EXPECT_NE(address->substr(address->rfind('.')), ".255");
    ++handed_out;
  }
  EXPECT_EQ(handed_out, 2 * 254);
}

TEST(PodIpPool, RefusesRangesOutsideLoopbackOrMalformed) {
  for (const char* bad :
       {"10.0.0.0/16", "127.0.0.0", "127.0.0.0/31", "127.0.0.0/4", "x/16", "127.0.0.0/abc"}) {
    auto pool = PodIpPool::Create(bad);
    ASSERT_FALSE(pool.ok()) << bad;
    EXPECT_EQ(pool.error().field, "--pod-ip-range");
  }
}

}  // namespace
}  // namespace fulcrum::local_node
