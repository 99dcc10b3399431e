// Events about an object: one Event per distinct occurrence, repeats folded
// into a series, and a per-object rate limit whose memory stays bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "operator/kube/events/event_recorder.h"
#include "tests/operator/kube/kube_test_support.h"

namespace fulcrum::kube {
namespace {

using testing::AdminClient;
using testing::ConfigMap;
using testing::CreateNamespace;

std::vector<nlohmann::json> EventsIn(ApiClient& client, const std::string& ns) {
  auto listed = client.List(resources::Events(), ns);
  EXPECT_TRUE(listed.ok()) << listed.error().ToString();
  return listed.ok() ? listed->items : std::vector<nlohmann::json>{};
}

TEST(KubeEvents, RepeatsBecomeASeriesOnOneEvent) {
  auto client = AdminClient();
  CreateNamespace(*client, "events-series");
  auto subject = client->Create(resources::ConfigMaps(), "events-series",
                                ConfigMap("events-series", "subject"));
  ASSERT_TRUE(subject.ok());
  EventRecorderOptions options;
  options.reporting_instance = "test-0";
  EventRecorder recorder(client, options);
  for (int i = 0; i < 3; ++i) {
    recorder.Record(*subject, EventType::kWarning, "Straggler", "Rebalance",
                    "worker 2 is slow (" + std::to_string(i) + ")");
  }
  recorder.Record(*subject, EventType::kNormal, "Rebalanced", "Rebalance", "new plan applied");
  recorder.Flush();

  const auto events = EventsIn(*client, "events-series");
  ASSERT_EQ(events.size(), 2u);
  for (const auto& event : events) {
    EXPECT_EQ(event.at("regarding").value("uid", ""), UidOf(*subject));
    EXPECT_EQ(event.value("reportingController", ""), "fulcrum.dev/operator");
    if (event.value("reason", "") == "Straggler") {
      EXPECT_EQ(event.value("type", ""), "Warning");
      ASSERT_TRUE(event.contains("series")) << event.dump();
      EXPECT_EQ(event.at("series").value("count", 0), 3);
      EXPECT_EQ(event.value("note", ""), "worker 2 is slow (0)") << "an Event's note is immutable";
    } else {
      EXPECT_EQ(event.value("reason", ""), "Rebalanced");
      EXPECT_FALSE(event.contains("series"));
    }
  }
}

TEST(KubeEvents, PerObjectRateLimitDropsTheExcess) {
  auto client = AdminClient();
  CreateNamespace(*client, "events-limit");
  auto subject =
      client->Create(resources::ConfigMaps(), "events-limit", ConfigMap("events-limit", "noisy"));
  ASSERT_TRUE(subject.ok());
  EventRecorderOptions options;
  options.reporting_instance = "test-0";
  options.burst_per_object = 3;
  options.qps_per_object = 0.001;
  EventRecorder recorder(client, options);
  for (int i = 0; i < 10; ++i) {
    recorder.Record(*subject, EventType::kNormal, "Reason" + std::to_string(i), "Act",
                    "distinct event");
  }
  recorder.Flush();
  EXPECT_EQ(EventsIn(*client, "events-limit").size(), 3u);
}

TEST(KubeEvents, RefilledBucketsAreForgottenSoMemoryStaysBounded) {
  auto client = AdminClient();
  CreateNamespace(*client, "events-bounded");
  EventRecorderOptions options;
  options.reporting_instance = "test-0";
  options.burst_per_object = 1;
  options.qps_per_object = 1000;  // refilled within a millisecond
  options.prune_buckets_above = 2;
  EventRecorder recorder(client, options);
  for (int i = 0; i < 4; ++i) {
    auto subject = client->Create(resources::ConfigMaps(), "events-bounded",
                                  ConfigMap("events-bounded", "quiet-" + std::to_string(i)));
    ASSERT_TRUE(subject.ok());
    recorder.Record(*subject, EventType::kNormal, "Seen", "Observe", "once");
    recorder.Flush();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Three buckets existed when the fourth object came; all had refilled, so they went.
  EXPECT_EQ(recorder.tracked_objects_for_test(), 1u);
  EXPECT_EQ(EventsIn(*client, "events-bounded").size(), 4u);
}

}  // namespace
}  // namespace fulcrum::kube
