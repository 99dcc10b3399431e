// A real control plane for one integration test binary: tests/cluster/up runs
// before the first test and tests/cluster/down after the last. Link the
// fulcrum_test_cluster_main library instead of gtest_main to get it.
#pragma once

#include <map>
#include <string>

#include "tests/support/subprocess.h"

namespace fulcrum::testing {

struct TestCluster {
  std::string dir;                         // the run folder (logs in dir/logs)
  std::map<std::string, std::string> env;  // cluster.env: KUBECONFIG, FULCRUM_APISERVER, ...

  const std::string& kubeconfig() const { return env.at("KUBECONFIG"); }
  std::string Get(const std::string& key) const {
    return env.count(key) ? env.at(key) : std::string();
  }
  // Runs kubectl against this cluster, e.g. Kubectl("get nodes -o json").
  CommandResult Kubectl(const std::string& arguments) const;
  // `kubectl wait --for=condition=CONDITION OBJECT`, asked again until it can wait: kubectl
  // fails at once ("accessor error: <nil> is of the type <nil>") while a new object has no
  // status.conditions yet, which a loaded machine shows. Returns the last attempt.
  CommandResult WaitForCondition(const std::string& object, const std::string& condition) const;
};

// The cluster of this test binary; valid once the global environment has set it up.
const TestCluster& Cluster();

// Path of a file in the source tree (FULCRUM_SOURCE_DIR is set by ctest).
std::string SourcePath(const std::string& relative);

}  // namespace fulcrum::testing
