// The chart is real: helm (built from its Go module, version-stamped) lints it
// and installs it into the local control plane, and the CRD it carries is served.
#include <gtest/gtest.h>

#include "tests/support/test_cluster.h"

namespace fulcrum {
namespace {

using testing::Cluster;
using testing::RunShell;
using testing::ShellQuote;
using testing::SourcePath;

std::string Helm(const std::string& arguments) {
  return ShellQuote(Cluster().Get("FULCRUM_HELM")) + " --kubeconfig " + ShellQuote(Cluster().kubeconfig()) + " " +
         arguments;
}

TEST(HelmSmoke, ChartLintsCleanly) {
  const auto lint = RunShell(Helm("lint --strict " + ShellQuote(SourcePath("helm/fulcrum"))));
  EXPECT_EQ(lint.exit_code, 0) << lint.output;
}

TEST(HelmSmoke, InstallingTheChartServesTheHeteroTrainingJobCrd) {
  const auto install = RunShell(Helm("install fulcrum " + ShellQuote(SourcePath("helm/fulcrum")) +
                                     " --namespace fulcrum-system --create-namespace --wait --timeout 120s"));
  ASSERT_EQ(install.exit_code, 0) << install.output;
  const auto established =
      Cluster().Kubectl("wait --for=condition=Established --timeout=60s crd/heterotrainingjobs.fulcrum.dev");
  EXPECT_EQ(established.exit_code, 0) << established.output;
  const auto status = RunShell(Helm("status fulcrum --namespace fulcrum-system -o json"));
  EXPECT_NE(status.output.find("\"status\":\"deployed\""), std::string::npos) << status.output;
}

}  // namespace
}  // namespace fulcrum
