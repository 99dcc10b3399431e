// checkpoint.path and output.path against the pod template's volumes: on a shared, writable
// volume or flagged with the field and the fix.
#include "operator/controller/shared_storage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fulcrum::controller {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

JobSpec WithVolume(const nlohmann::json& volume, const nlohmann::json& mount) {
  JobSpec spec;
  spec.checkpoint_path = "/data/checkpoints/job";
  spec.pod_template.volumes = nlohmann::json::array({volume});
  spec.pod_template.volume_mounts = nlohmann::json::array({mount});
  return spec;
}

TEST(UnsharedPaths, ACheckpointUnderAWritableClaimMountIsShared) {
  const JobSpec spec =
      WithVolume({{"name", "work"}, {"persistentVolumeClaim", {{"claimName", "training"}}}},
                 {{"name", "work"}, {"mountPath", "/data/"}});
  EXPECT_THAT(UnsharedPaths(spec), IsEmpty());
}

TEST(UnsharedPaths, ACheckpointOnNoVolumeIsFlaggedNamingTheFieldAndTheFix) {
  JobSpec spec;
  spec.checkpoint_path = "/ckpt";
  const std::vector<StorageProblem> problems = UnsharedPaths(spec);
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_EQ(problems[0].field, "spec.checkpoint.path");
  EXPECT_THAT(problems[0].message, HasSubstr("resume from step 0"));
  EXPECT_THAT(problems[0].message, HasSubstr("PersistentVolumeClaim"));
}

TEST(UnsharedPaths, AMountThatOnlySharesAPrefixOfTheNameDoesNotHoldThePath) {
  const JobSpec spec =
      WithVolume({{"name", "work"}, {"persistentVolumeClaim", {{"claimName", "training"}}}},
                 {{"name", "work"}, {"mountPath", "/dat"}});
  EXPECT_THAT(UnsharedPaths(spec), SizeIs(1));
}

TEST(UnsharedPaths, EmptyDirAndHostPathAreNotShared) {
  for (const char* source : {"emptyDir", "hostPath"}) {
    const JobSpec spec = WithVolume({{"name", "work"}, {source, nlohmann::json::object()}},
                                    {{"name", "work"}, {"mountPath", "/data"}});
    const std::vector<StorageProblem> problems = UnsharedPaths(spec);
    ASSERT_THAT(problems, SizeIs(1)) << source;
    EXPECT_THAT(problems[0].message, HasSubstr(source));
  }
}

TEST(UnsharedPaths, AReadOnlyMountOrClaimCannotHoldCheckpoints) {
  const JobSpec read_only_mount =
      WithVolume({{"name", "work"}, {"persistentVolumeClaim", {{"claimName", "training"}}}},
                 {{"name", "work"}, {"mountPath", "/data"}, {"readOnly", true}});
  EXPECT_THAT(UnsharedPaths(read_only_mount), SizeIs(1));
  const JobSpec read_only_claim =
      WithVolume({{"name", "work"},
                  {"persistentVolumeClaim", {{"claimName", "training"}, {"readOnly", true}}}},
                 {{"name", "work"}, {"mountPath", "/data"}});
  EXPECT_THAT(UnsharedPaths(read_only_claim)[0].message, HasSubstr("read-only"));
}

TEST(UnsharedPaths, TheDeepestMountHoldsThePath) {
  JobSpec spec;
  spec.output_path = "/data/out/model";
  spec.pod_template.volumes = nlohmann::json::array(
      {{{"name", "work"}, {"persistentVolumeClaim", {{"claimName", "training"}}}},
       {{"name", "scratch"}, {"emptyDir", nlohmann::json::object()}}});
  spec.pod_template.volume_mounts =
      nlohmann::json::array({{{"name", "work"}, {"mountPath", "/data"}},
                             {{"name", "scratch"}, {"mountPath", "/data/out"}}});
  const std::vector<StorageProblem> problems = UnsharedPaths(spec);
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_EQ(problems[0].field, "spec.output.path");
  EXPECT_THAT(problems[0].message, HasSubstr("scratch"));
}

}  // namespace
}  // namespace fulcrum::controller
