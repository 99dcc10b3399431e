// main() for integration test binaries: one control plane per binary.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "tests/support/polling.h"
#include "tests/support/test_cluster.h"

namespace fulcrum::testing {
namespace {

std::optional<TestCluster>& ClusterSlot() {
  static std::optional<TestCluster> cluster;
  return cluster;
}

class ClusterEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string pattern = "/tmp/fulcrum-it-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) GTEST_FAIL() << "mkdtemp failed";
    dir_ = pattern;
    // A test binary asks for more of the cluster (e.g. --local-nodes FILE) through this variable.
    const char* extra = std::getenv("FULCRUM_CLUSTER_UP_ARGS");
    const CommandResult up =
        RunShell(ShellQuote(SourcePath("tests/cluster/up")) + " --dir " + ShellQuote(dir_) +
                 (extra != nullptr ? std::string(" ") + extra : std::string()));
    if (up.exit_code != 0) {
      GTEST_FAIL() << "tests/cluster/up failed (exit " << up.exit_code << "):\n" << up.output;
    }
    TestCluster cluster;
    cluster.dir = dir_;
    std::ifstream env_file(dir_ + "/cluster.env");
    for (std::string line; std::getline(env_file, line);) {
      if (auto eq = line.find('='); eq != std::string::npos)
        cluster.env[line.substr(0, eq)] = line.substr(eq + 1);
    }
    ClusterSlot() = std::move(cluster);
  }

  void TearDown() override {
    if (dir_.empty()) return;
    const CommandResult down =
        RunShell(ShellQuote(SourcePath("tests/cluster/down")) + " --dir " + ShellQuote(dir_));
    EXPECT_EQ(down.exit_code, 0) << down.output;
    // Keep the logs of a failed run for diagnosis; remove them after a clean one.
    if (!::testing::UnitTest::GetInstance()->Failed() &&
        std::getenv("FULCRUM_KEEP_CLUSTER") == nullptr) {
      std::filesystem::remove_all(dir_);
    } else {
      std::fprintf(stderr, "cluster logs kept in %s/logs\n", dir_.c_str());
    }
  }

 private:
  std::string dir_;
};

}  // namespace

const TestCluster& Cluster() {
  if (!ClusterSlot()) {
    std::fprintf(stderr, "no test cluster: tests/cluster/up failed (see above)\n");
    std::abort();
  }
  return *ClusterSlot();
}

CommandResult TestCluster::Kubectl(const std::string& arguments) const {
  return RunShell(ShellQuote(env.at("FULCRUM_KUBECTL")) + " --kubeconfig " +
                  ShellQuote(kubeconfig()) + " " + arguments);
}

CommandResult TestCluster::WaitForCondition(const std::string& object,
                                            const std::string& condition) const {
  CommandResult last;
  WaitUntil(
      [&] {
        last = Kubectl("wait --for=condition=" + condition + " --timeout=60s " + object);
        return last.exit_code == 0;
      },
      std::chrono::seconds(120));
  return last;
}

std::string SourcePath(const std::string& relative) {
  const char* root = std::getenv("FULCRUM_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/" + relative;
}

}  // namespace fulcrum::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // gtest owns registered environments; hand it one.
  ::testing::AddGlobalTestEnvironment(
      std::make_unique<fulcrum::testing::ClusterEnvironment>().release());
  return RUN_ALL_TESTS();
}
