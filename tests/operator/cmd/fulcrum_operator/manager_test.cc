// The operator's manager: runnables without the lease run from start to shutdown, those with it
// only while the campaign grants leadership, in order, stopped in reverse, and again after
// leadership is won back.
#include "operator/cmd/fulcrum_operator/manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "tests/support/polling.h"

namespace fulcrum::operator_main {
namespace {

using ::testing::ElementsAre;
using namespace std::chrono_literals;

// What runnables did, in order: "start:x", "stop:x".
class Journal {
 public:
  void Add(std::string entry) {
    std::lock_guard lock(mutex_);
    entries_.push_back(std::move(entry));
  }
  std::vector<std::string> entries() const {
    std::lock_guard lock(mutex_);
    return entries_;
  }
  bool Has(const std::string& entry) const {
    const std::vector<std::string> all = entries();
    return std::find(all.begin(), all.end(), entry) != all.end();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> entries_;
};

Runnable Recorded(Journal& journal, const std::string& name, bool needs_lease) {
  return {.name = name,
          .needs_lease = needs_lease,
          .start = {},
          .run = [&journal, name](std::stop_token stop) {
            journal.Add("start:" + name);
            WaitForStop(stop);
            journal.Add("stop:" + name);
          }};
}

// Leadership the test hands out and takes back: each Grant is one term.
class Leadership {
 public:
  Campaign campaign() {
    return [this](std::stop_token stop, const std::function<void(std::stop_token)>& lead) {
      while (!stop.stop_requested()) {
        std::stop_source term;
        {
          std::unique_lock lock(mutex_);
          changed_.wait(lock, stop, [&] { return granted_; });
          if (stop.stop_requested()) return;
          term_ = &term;
        }
        std::stop_callback end(stop, [&] { term.request_stop(); });
        lead(term.get_token());
        std::lock_guard lock(mutex_);
        term_ = nullptr;
      }
    };
  }
  void Grant() {
    std::lock_guard lock(mutex_);
    granted_ = true;
    changed_.notify_all();
  }
  void Revoke() {
    std::lock_guard lock(mutex_);
    granted_ = false;
    if (term_ != nullptr) term_->request_stop();
  }

 private:
  std::mutex mutex_;
  std::condition_variable_any changed_;
  bool granted_ = false;
  std::stop_source* term_ = nullptr;
};

TEST(Manager, LeaseRunnablesRunOnlyWhileLeadingAndStopInReverseOrder) {
  Journal journal;
  Leadership leadership;
  Manager manager;
  manager.Add(Recorded(journal, "informers", false));
  manager.Add(Recorded(journal, "coordinator", true));
  manager.Add(Recorded(journal, "controller", true));
  ASSERT_TRUE(manager.Start().ok());
  std::stop_source shutdown;
  std::jthread running([&] { manager.Run(shutdown.get_token(), leadership.campaign()); });

  ASSERT_TRUE(testing::WaitUntil([&] { return journal.Has("start:informers"); }, 10s));
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(journal.Has("start:coordinator")) << "nothing that needs the lease without it";

  leadership.Grant();
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return journal.Has("start:coordinator") && journal.Has("start:controller"); }, 10s));
  leadership.Revoke();
  ASSERT_TRUE(testing::WaitUntil([&] { return journal.Has("stop:coordinator"); }, 10s));
  std::vector<std::string> stops;
  for (const std::string& entry : journal.entries()) {
    if (entry.starts_with("stop:")) stops.push_back(entry);
  }
  EXPECT_THAT(stops, ElementsAre("stop:controller", "stop:coordinator"))
      << "the controller stops before the coordinator forgets its jobs; the caches stay";

  shutdown.request_stop();
  running = {};
  EXPECT_TRUE(journal.Has("stop:informers"));
}

TEST(Manager, LeadershipWonBackRunsTheLeaseRunnablesAgain) {
  Journal journal;
  Leadership leadership;
  Manager manager;
  manager.Add(Recorded(journal, "controller", true));
  std::stop_source shutdown;
  std::jthread running([&] { manager.Run(shutdown.get_token(), leadership.campaign()); });
  const auto starts = [&] {
    const std::vector<std::string> all = journal.entries();
    return std::count(all.begin(), all.end(), "start:controller");
  };
  leadership.Grant();
  ASSERT_TRUE(testing::WaitUntil([&] { return starts() == 1; }, 10s));
  leadership.Revoke();
  ASSERT_TRUE(testing::WaitUntil([&] { return journal.Has("stop:controller"); }, 10s));
  leadership.Grant();
  EXPECT_TRUE(testing::WaitUntil([&] { return starts() == 2; }, 10s));
  shutdown.request_stop();
}

TEST(Manager, AFailedStartNamesTheRunnableAndStopsTheStart) {
  Manager manager;
  bool later_started = false;
  manager.Add({.name = "metrics",
               .needs_lease = false,
               .start = [] { return Status(MakeError(ErrorCode::kUnavailable, "port in use")); },
               .run = {}});
  manager.Add({.name = "health",
               .needs_lease = false,
               .start =
                   [&] {
                     later_started = true;
                     return Ok();
                   },
               .run = {}});
  const Status started = manager.Start();
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.error().field, "metrics");
  EXPECT_FALSE(later_started);
}

TEST(Manager, WithoutLeaderElectionTheReplicaLeadsUntilShutdown) {
  Journal journal;
  Manager manager;
  manager.Add(Recorded(journal, "controller", true));
  std::stop_source shutdown;
  std::jthread running([&] { manager.Run(shutdown.get_token(), AlwaysLead()); });
  ASSERT_TRUE(testing::WaitUntil([&] { return journal.Has("start:controller"); }, 10s));
  shutdown.request_stop();
  running = {};
  EXPECT_TRUE(journal.Has("stop:controller"));
}

}  // namespace
}  // namespace fulcrum::operator_main
