// The work queue's contract, with a fake clock: dedup, one worker per key,
// re-queue of keys changed in flight, backoff growth, shutdown.
#include "operator/kube/workqueue/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <set>
#include <thread>

#include "tests/operator/kube/fake_clock.h"

namespace fulcrum::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::unique_ptr<RateLimiter> ExponentialOnly() {
  return std::make_unique<ItemExponentialRateLimiter>(milliseconds(5), seconds(1000));
}

TEST(WorkQueue, AKeyAddedManyTimesBeforeProcessingIsHandedOutOnce) {
  WorkQueue queue;
  queue.Add("ns/a");
  queue.Add("ns/b");
  queue.Add("ns/a");
  queue.Add("ns/a");
  EXPECT_EQ(queue.Len(), 2u);
  EXPECT_EQ(queue.Get(), "ns/a");
  EXPECT_EQ(queue.Get(), "ns/b");
  EXPECT_EQ(queue.Len(), 0u);
}

TEST(WorkQueue, AKeyInFlightIsNotHandedToASecondWorkerButIsRequeuedOnDone) {
  WorkQueue queue;
  queue.Add("ns/a");
  ASSERT_EQ(queue.Get(), "ns/a");
  queue.Add("ns/a");  // changed while a worker holds it
  EXPECT_EQ(queue.Len(), 0u) << "must not be handed out while in flight";

  auto second = std::async(std::launch::async, [&] { return queue.Get(); });
  EXPECT_EQ(second.wait_for(milliseconds(50)), std::future_status::timeout);
  queue.Done("ns/a");
  EXPECT_EQ(second.get(), "ns/a") << "the change made in flight must be processed again";
  queue.Done("ns/a");
  EXPECT_EQ(queue.Len(), 0u);
}

TEST(WorkQueue, ConcurrentWorkersNeverHoldTheSameKey) {
  WorkQueue queue;
  std::mutex mutex;
  std::set<std::string> held;
  std::atomic<bool> overlap{false};
  std::atomic<int> processed{0};
  std::vector<std::jthread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (auto key = queue.Get()) {
        {
          std::lock_guard lock(mutex);
          if (!held.insert(*key).second) overlap = true;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        {
          std::lock_guard lock(mutex);
          held.erase(*key);
        }
        ++processed;
        queue.Done(*key);
      }
    });
  }
  for (int round = 0; round < 200; ++round) queue.Add("key-" + std::to_string(round % 3));
  queue.ShutDownWithDrain();
  workers.clear();
  EXPECT_FALSE(overlap.load());
  EXPECT_GE(processed.load(), 3);
}

TEST(WorkQueue, RateLimitedAddsBackOffExponentiallyPerKeyUntilForgotten) {
  auto clock = std::make_shared<testing::FakeClock>();
  WorkQueue queue(ExponentialOnly(), clock);
  const std::vector<milliseconds> expected = {milliseconds(5), milliseconds(10), milliseconds(20),
                                              milliseconds(40)};
  for (std::size_t failure = 0; failure < expected.size(); ++failure) {
    queue.AddRateLimited("ns/a");
    EXPECT_EQ(queue.NumRequeues("ns/a"), static_cast<int>(failure + 1));
    clock->Advance(expected[failure] - milliseconds(1));
    EXPECT_EQ(queue.Len(), 0u) << "failure " << failure << " came back before its backoff";
    clock->Advance(milliseconds(1));
    EXPECT_EQ(queue.Len(), 1u) << "failure " << failure << " did not come back after its backoff";
    ASSERT_EQ(queue.Get(), "ns/a");
    queue.Done("ns/a");
  }
  queue.Forget("ns/a");
  EXPECT_EQ(queue.NumRequeues("ns/a"), 0);
  queue.AddRateLimited("ns/a");
  clock->Advance(milliseconds(5));
  EXPECT_EQ(queue.Len(), 1u) << "after Forget the backoff starts again from the base";
}

TEST(WorkQueue, BackoffIsCappedAtTheMaximum) {
  ItemExponentialRateLimiter limiter(milliseconds(5), seconds(10));
  Clock::Duration last{};
  for (int failure = 0; failure < 100; ++failure) last = limiter.When("k");
  EXPECT_EQ(last, seconds(10));
}

TEST(WorkQueue, OverallBucketLimitsTheRateOfAllKeys) {
  auto clock = std::make_shared<testing::FakeClock>();
  BucketRateLimiter bucket(10, 2, clock);  // 10 per second, burst 2
  EXPECT_EQ(bucket.When("a"), Clock::Duration::zero());
  EXPECT_EQ(bucket.When("b"), Clock::Duration::zero());
  EXPECT_EQ(bucket.When("c"), milliseconds(100));
  EXPECT_EQ(bucket.When("d"), milliseconds(200));
  clock->Advance(seconds(1));
  EXPECT_EQ(bucket.When("e"), Clock::Duration::zero());
}

TEST(WorkQueue, DelayedAddKeepsTheEarliestTime) {
  auto clock = std::make_shared<testing::FakeClock>();
  WorkQueue queue(ExponentialOnly(), clock);
  queue.AddAfter("ns/a", seconds(10));
  queue.AddAfter("ns/a", seconds(1));
  queue.AddAfter("ns/a", seconds(5));
  clock->Advance(seconds(1));
  EXPECT_EQ(queue.Len(), 1u);
  ASSERT_EQ(queue.Get(), "ns/a");
  queue.Done("ns/a");
  clock->Advance(seconds(10));
  EXPECT_EQ(queue.Len(), 0u) << "the later requests were folded into the earliest";
}

TEST(WorkQueue, AWaitingWorkerWakesWhenADelayedKeyBecomesDue) {
  auto clock = std::make_shared<testing::FakeClock>();
  WorkQueue queue(ExponentialOnly(), clock);
  queue.AddAfter("ns/a", seconds(30));
  auto worker = std::async(std::launch::async, [&] { return queue.Get(); });
  EXPECT_EQ(worker.wait_for(milliseconds(50)), std::future_status::timeout);
  clock->Advance(seconds(30));
  EXPECT_EQ(worker.get(), "ns/a");
}

TEST(WorkQueue, ShutDownWakesIdleWorkersAndDrainsWhatIsQueued) {
  WorkQueue queue;
  auto idle = std::async(std::launch::async, [&] { return queue.Get(); });
  EXPECT_EQ(idle.wait_for(milliseconds(50)), std::future_status::timeout);
  queue.ShutDown();
  EXPECT_EQ(idle.get(), std::nullopt);

  WorkQueue draining;
  draining.Add("a");
  draining.Add("b");
  draining.ShutDown();
  draining.Add("c");  // ignored after shutdown
  EXPECT_EQ(draining.Get(), "a");
  EXPECT_EQ(draining.Get(), "b");
  EXPECT_EQ(draining.Get(), std::nullopt);
  EXPECT_TRUE(draining.ShuttingDown());
}

TEST(WorkQueue, ShutDownWithDrainWaitsForKeysInFlight) {
  WorkQueue queue;
  queue.Add("a");
  ASSERT_EQ(queue.Get(), "a");
  auto drained = std::async(std::launch::async, [&] { queue.ShutDownWithDrain(); });
  EXPECT_EQ(drained.wait_for(milliseconds(50)), std::future_status::timeout);
  queue.Done("a");
  drained.get();
}

}  // namespace
}  // namespace fulcrum::kube
