#include "tests/tools/local_node/podspec/volumes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "tests/support/polling.h"
#include "tests/support/temporary_directory.h"
#include "tests/tools/local_node/podspec/fake_pod_references.h"

namespace fulcrum::local_node {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

const PodRuntimeFacts kVolumeFacts{.pod_ip = "10.1.0.7", .host_ip = "192.168.0.2"};

using fulcrum::testing::ReadFile;

unsigned Mode(const fs::path& path) {
  return static_cast<unsigned>(fs::status(path).permissions()) & 0777;
}

// Every regular file under `directory`, as relative paths, sorted.
std::vector<std::string> FilesUnder(const fs::path& directory) {
  std::vector<std::string> files;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(directory)) {
    if (entry.is_regular_file())
      files.push_back(entry.path().lexically_relative(directory).generic_string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class VolumesTest : public ::testing::Test {
 protected:
  Json Pod(Json volumes, Json containers = Json::array()) const {
    return Json{{"metadata",
                 {{"name", "trainer-0"},
                  {"namespace", "jobs"},
                  {"uid", "uid-123"},
                  {"labels", {{"app", "trainer"}, {"rank", "0"}}}}},
                {"spec",
                 {{"serviceAccountName", "trainer-sa"},
                  {"containers", containers},
                  {"volumes", std::move(volumes)}}}};
  }
  Result<std::vector<PreparedVolume>> Prepare(const Json& volumes,
                                              const Json& containers = Json::array()) {
    return PrepareVolumes(Pod(volumes, containers), kVolumeFacts, references_, pod_dir_);
  }
  fs::path VolumeDir(const std::string& name) const { return pod_dir_ / "volumes" / name; }

  FakePodReferences references_;
  fulcrum::testing::TemporaryDirectory temp_{"podspec-volumes"};
  const fs::path root_ = temp_.path();
  const fs::path pod_dir_ = root_ / "pod";
};

TEST_F(VolumesTest, SecretVolumeWritesEveryDecodedKeyWithMode0644ByDefault) {
  references_.AddSecret("jobs", "creds", {{"user", "alice"}, {"password", "pw"}});
  Result<std::vector<PreparedVolume>> volumes =
      Prepare(Json::array({{{"name", "creds"}, {"secret", {{"secretName", "creds"}}}}}));
  ASSERT_TRUE(volumes.ok()) << volumes.error().ToString();
  ASSERT_EQ(volumes->size(), 1u);
  EXPECT_EQ((*volumes)[0].name, "creds");
  EXPECT_EQ((*volumes)[0].host_path, VolumeDir("creds"));
  EXPECT_TRUE((*volumes)[0].read_only);
  EXPECT_THAT(FilesUnder(VolumeDir("creds")), ElementsAre("password", "user"));
  EXPECT_EQ(ReadFile(VolumeDir("creds") / "user"), "alice");
  EXPECT_EQ(Mode(VolumeDir("creds") / "user"), 0644u);
}

TEST_F(VolumesTest, SecretVolumeItemsSelectKeysAtTheirPathsAndModes) {
  references_.AddSecret("jobs", "tls", {{"tls.crt", "CERT"}, {"tls.key", "KEY"}, {"unused", "x"}});
  Json secret = {
      {"secretName", "tls"},
      {"defaultMode", 0440},
      {"items", Json::array({{{"key", "tls.crt"}, {"path", "certs/server.crt"}},
                             {{"key", "tls.key"}, {"path", "certs/server.key"}, {"mode", 0400}}})}};
  Result<std::vector<PreparedVolume>> volumes =
      Prepare(Json::array({{{"name", "tls"}, {"secret", secret}}}));
  ASSERT_TRUE(volumes.ok()) << volumes.error().ToString();
  EXPECT_THAT(FilesUnder(VolumeDir("tls")), ElementsAre("certs/server.crt", "certs/server.key"));
  EXPECT_EQ(ReadFile(VolumeDir("tls") / "certs/server.key"), "KEY");
  EXPECT_EQ(Mode(VolumeDir("tls") / "certs/server.crt"), 0440u);
  EXPECT_EQ(Mode(VolumeDir("tls") / "certs/server.key"), 0400u);
}

TEST_F(VolumesTest, ConfigMapVolumeWritesDataAndDecodedBinaryData) {
  references_.AddConfigMap("jobs", "settings", {{"app.yaml", "a: 1\n"}},
                           {{"blob.bin", std::string("\0\1\2", 3)}});
  Result<std::vector<PreparedVolume>> volumes =
      Prepare(Json::array({{{"name", "settings"}, {"configMap", {{"name", "settings"}}}}}));
  ASSERT_TRUE(volumes.ok()) << volumes.error().ToString();
  EXPECT_THAT(FilesUnder(VolumeDir("settings")), ElementsAre("app.yaml", "blob.bin"));
  EXPECT_EQ(ReadFile(VolumeDir("settings") / "app.yaml"), "a: 1\n");
  EXPECT_EQ(ReadFile(VolumeDir("settings") / "blob.bin"), std::string("\0\1\2", 3));
}

TEST_F(VolumesTest, AMissingOptionalObjectGivesAnEmptyVolume) {
  Result<std::vector<PreparedVolume>> volumes = Prepare(
      Json::array({{{"name", "maybe"}, {"configMap", {{"name", "absent"}, {"optional", true}}}}}));
  ASSERT_TRUE(volumes.ok()) << volumes.error().ToString();
  EXPECT_TRUE(fs::is_directory(VolumeDir("maybe")));
  EXPECT_TRUE(FilesUnder(VolumeDir("maybe")).empty());
}

TEST_F(VolumesTest, AMissingRequiredSecretIsAFailedPreconditionNamingTheVolume) {
  Result<std::vector<PreparedVolume>> volumes =
      Prepare(Json::array({{{"name", "scratch"}, {"emptyDir", Json::object()}},
                           {{"name", "creds"}, {"secret", {{"secretName", "gone"}}}}}));
  ASSERT_FALSE(volumes.ok());
  EXPECT_EQ(volumes.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(volumes.error().field, "spec.volumes[1].secret");
  EXPECT_THAT(volumes.error().message, HasSubstr("volume \"creds\""));
  EXPECT_THAT(volumes.error().message, HasSubstr("Secret jobs/gone does not exist"));
}

TEST_F(VolumesTest, AMissingItemKeyIsAFailedPreconditionUnlessOptional) {
  references_.AddSecret("jobs", "creds", {{"user", "alice"}});
  Json items =
      Json::array({{{"key", "user"}, {"path", "user"}}, {{"key", "token"}, {"path", "token"}}});
  Result<std::vector<PreparedVolume>> required = Prepare(
      Json::array({{{"name", "creds"}, {"secret", {{"secretName", "creds"}, {"items", items}}}}}));
  ASSERT_FALSE(required.ok());
  EXPECT_EQ(required.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(required.error().field, "spec.volumes[0].secret.items[1]");

  Result<std::vector<PreparedVolume>> optional = Prepare(
      Json::array({{{"name", "creds"},
                    {"secret", {{"secretName", "creds"}, {"items", items}, {"optional", true}}}}}));
  ASSERT_TRUE(optional.ok()) << optional.error().ToString();
  EXPECT_THAT(FilesUnder(VolumeDir("creds")), ElementsAre("user"));
}

TEST_F(VolumesTest, ProjectedKubeApiAccessVolumeHasTokenCaAndNamespace) {
  references_.AddConfigMap("jobs", "kube-root-ca.crt",
                           {{"ca.crt", "-----BEGIN CERTIFICATE-----\n"}});
  references_.SetToken("eyJ.token.sig");
  // As the ServiceAccount admission plugin adds it to every pod.
  Json projected = {
      {"defaultMode", 420},
      {"sources",
       Json::array({{{"serviceAccountToken", {{"expirationSeconds", 3607}, {"path", "token"}}}},
                    {{"configMap",
                      {{"name", "kube-root-ca.crt"},
                       {"items", Json::array({{{"key", "ca.crt"}, {"path", "ca.crt"}}})}}}},
                    {{"downwardAPI",
                      {{"items", Json::array({{{"path", "namespace"},
                                               {"fieldRef",
                                                {{"apiVersion", "v1"},
                                                 {"fieldPath", "metadata.namespace"}}}}})}}}}})}};
  Result<std::vector<PreparedVolume>> volumes =
      Prepare(Json::array({{{"name", "kube-api-access-x7k2p"}, {"projected", projected}}}));
  ASSERT_TRUE(volumes.ok()) << volumes.error().ToString();
  const fs::path directory = VolumeDir("kube-api-access-x7k2p");
  EXPECT_THAT(FilesUnder(directory), ElementsAre("ca.crt", "namespace", "token"));
  EXPECT_EQ(ReadFile(directory / "token"), "eyJ.token.sig");
  EXPECT_EQ(ReadFile(directory / "ca.crt"), "-----BEGIN CERTIFICATE-----\n");
  EXPECT_EQ(ReadFile(directory / "namespace"), "jobs");
  EXPECT_EQ(Mode(directory / "token"), 0644u);

  ASSERT_EQ(references_.token_requests().size(), 1u);
  const FakePodReferences::TokenRequest& request = references_.token_requests()[0];
  EXPECT_EQ(request.ns, "jobs");
  EXPECT_EQ(request.service_account, "trainer-sa");
  EXPECT_TRUE(request.audiences.empty());
  EXPECT_EQ(request.expiration_seconds, 3607);
  EXPECT_EQ(request.pod_name, "trainer-0");
  EXPECT_EQ(request.pod_uid, "uid-123");
}

TEST_F(VolumesTest, ProjectedTokenPassesItsAudienceAndDefaultsExpirationToAnHour) {
  Json projected = {
      {"sources",
       Json::array({{{"serviceAccountToken", {{"audience", "vault"}, {"path", "t"}}}}})}};
  Result<std::vector<PreparedVolume>> volumes =
      Prepare(Json::array({{{"name", "vault"}, {"projected", projected}}}));
  ASSERT_TRUE(volumes.ok()) << volumes.error().ToString();
  ASSERT_EQ(references_.token_requests().size(), 1u);
  EXPECT_THAT(references_.token_requests()[0].audiences, ElementsAre("vault"));
  EXPECT_EQ(references_.token_requests()[0].expiration_seconds, 3600);
}

TEST_F(VolumesTest, RefusesAnUnsupportedProjection) {
  Json projected = {{"sources", Json::array({{{"clusterTrustBundle", {{"path", "b"}}}}})}};
  Result<std::vector<PreparedVolume>> volumes =
      Prepare(Json::array({{{"name", "p"}, {"projected", projected}}}));
  ASSERT_FALSE(volumes.ok());
  EXPECT_EQ(volumes.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(volumes.error().field, "spec.volumes[0].projected.sources[0]");
  EXPECT_THAT(volumes.error().message, HasSubstr("clusterTrustBundle"));
}

TEST_F(VolumesTest, DownwardApiVolumeWritesFieldsAndResources) {
  Json containers =
      Json::array({{{"name", "main"}, {"resources", {{"limits", {{"memory", "2Gi"}}}}}}});
  Json downward_api = {
      {"items",
       Json::array(
           {{{"path", "labels"}, {"fieldRef", {{"fieldPath", "metadata.labels"}}}},
            {{"path", "name"}, {"fieldRef", {{"fieldPath", "metadata.name"}}}, {"mode", 0600}},
            {{"path", "mem"},
             {"resourceFieldRef",
              {{"containerName", "main"}, {"resource", "limits.memory"}, {"divisor", "1Mi"}}}}})}};
  Result<std::vector<PreparedVolume>> volumes =
      Prepare(Json::array({{{"name", "info"}, {"downwardAPI", downward_api}}}), containers);
  ASSERT_TRUE(volumes.ok()) << volumes.error().ToString();
  EXPECT_EQ(ReadFile(VolumeDir("info") / "labels"), "app=\"trainer\"\nrank=\"0\"");
  EXPECT_EQ(ReadFile(VolumeDir("info") / "name"), "trainer-0");
  EXPECT_EQ(Mode(VolumeDir("info") / "name"), 0600u);
  EXPECT_EQ(ReadFile(VolumeDir("info") / "mem"), "2048");
}

TEST_F(VolumesTest, DownwardApiResourceFieldRefInAVolumeNeedsAContainerName) {
  Json downward_api = {
      {"items",
       Json::array({{{"path", "cpu"}, {"resourceFieldRef", {{"resource", "limits.cpu"}}}}})}};
  Result<std::vector<PreparedVolume>> volumes =
      Prepare(Json::array({{{"name", "info"}, {"downwardAPI", downward_api}}}));
  ASSERT_FALSE(volumes.ok());
  EXPECT_EQ(volumes.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(volumes.error().field,
            "spec.volumes[0].downwardAPI.items[0].resourceFieldRef.containerName");
}

TEST_F(VolumesTest, ARefreshReplacesChangedFilesAndRemovesKeysThatLeft) {
  references_.AddConfigMap("jobs", "settings", {{"a", "1"}, {"b", "1"}});
  const Json volumes = Json::array({{{"name", "settings"}, {"configMap", {{"name", "settings"}}}}});
  ASSERT_TRUE(Prepare(volumes).ok());
  references_.AddConfigMap("jobs", "settings", {{"a", "2"}, {"c", "2"}});
  Result<std::vector<PreparedVolume>> refreshed = Prepare(volumes);
  ASSERT_TRUE(refreshed.ok()) << refreshed.error().ToString();
  EXPECT_THAT(FilesUnder(VolumeDir("settings")), ElementsAre("a", "c"));
  EXPECT_EQ(ReadFile(VolumeDir("settings") / "a"), "2");
}

TEST_F(VolumesTest, ARefreshReplacesAFileWithADirectoryOfTheSameName) {
  references_.AddSecret("jobs", "s", {{"k", "v"}});
  Json items = Json::array({{{"key", "k"}, {"path", "conf"}}});
  ASSERT_TRUE(
      Prepare(Json::array({{{"name", "s"}, {"secret", {{"secretName", "s"}, {"items", items}}}}}))
          .ok());
  items = Json::array({{{"key", "k"}, {"path", "conf/k"}}});
  Result<std::vector<PreparedVolume>> refreshed =
      Prepare(Json::array({{{"name", "s"}, {"secret", {{"secretName", "s"}, {"items", items}}}}}));
  ASSERT_TRUE(refreshed.ok()) << refreshed.error().ToString();
  EXPECT_THAT(FilesUnder(VolumeDir("s")), ElementsAre("conf/k"));
}

TEST_F(VolumesTest, RefusesItemPathsThatLeaveTheVolume) {
  references_.AddSecret("jobs", "s", {{"k", "v"}});
  for (const char* path : {"../escape", "a/../../b", "/etc/passwd", "..data", ""}) {
    Json items = Json::array({{{"key", "k"}, {"path", path}}});
    Result<std::vector<PreparedVolume>> volumes = Prepare(
        Json::array({{{"name", "s"}, {"secret", {{"secretName", "s"}, {"items", items}}}}}));
    ASSERT_FALSE(volumes.ok()) << path;
    EXPECT_EQ(volumes.error().code, ErrorCode::kInvalidArgument) << path;
    EXPECT_EQ(volumes.error().field, "spec.volumes[0].secret.items[0].path") << path;
  }
  EXPECT_FALSE(fs::exists(root_ / "escape"));
}

TEST_F(VolumesTest, RefusesAPathThatIsBothAFileAndADirectory) {
  references_.AddSecret("jobs", "s", {{"k", "v"}});
  Json items = Json::array({{{"key", "k"}, {"path", "a"}}, {{"key", "k"}, {"path", "a/b"}}});
  Result<std::vector<PreparedVolume>> volumes =
      Prepare(Json::array({{{"name", "s"}, {"secret", {{"secretName", "s"}, {"items", items}}}}}));
  ASSERT_FALSE(volumes.ok());
  EXPECT_EQ(volumes.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(volumes.error().field, "spec.volumes[0].secret");
}

TEST_F(VolumesTest, RefusesAModeOutsideThePermissionBits) {
  references_.AddSecret("jobs", "s", {{"k", "v"}});
  Result<std::vector<PreparedVolume>> volumes = Prepare(
      Json::array({{{"name", "s"}, {"secret", {{"secretName", "s"}, {"defaultMode", 04755}}}}}));
  ASSERT_FALSE(volumes.ok());
  EXPECT_EQ(volumes.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(volumes.error().field, "spec.volumes[0].secret.defaultMode");
}

TEST_F(VolumesTest, AnUnsupportedVolumeTypeNamesTheVolumeAndTheType) {
  Result<std::vector<PreparedVolume>> volumes =
      Prepare(Json::array({{{"name", "scratch"}, {"emptyDir", Json::object()}},
                           {{"name", "data"}, {"nfs", {{"server", "nas"}, {"path", "/data"}}}}}));
  ASSERT_FALSE(volumes.ok());
  EXPECT_EQ(volumes.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(volumes.error().field, "spec.volumes[1]");
  EXPECT_THAT(volumes.error().message, HasSubstr("volume \"data\""));
  EXPECT_THAT(volumes.error().message, HasSubstr("\"nfs\" is not supported"));
  EXPECT_THAT(volumes.error().message, HasSubstr("emptyDir, hostPath, persistentVolumeClaim"));
}

Json ClaimVolume(const std::string& claim, bool read_only = false) {
  return Json::array(
      {{{"name", "data"},
        {"persistentVolumeClaim", {{"claimName", claim}, {"readOnly", read_only}}}}});
}

TEST_F(VolumesTest, AClaimIsTheDirectoryOfTheHostPathOrLocalVolumeItIsBoundTo) {
  fs::create_directories(root_ / "pv-host");
  fs::create_directories(root_ / "pv-local");
  references_.AddPersistentVolume("pv-host",
                                  {{"hostPath", {{"path", (root_ / "pv-host").string()}}}});
  references_.AddPersistentVolume("pv-local",
                                  {{"local", {{"path", (root_ / "pv-local").string()}}}});
  references_.AddClaim("jobs", "checkpoints", "pv-host");
  references_.AddClaim("jobs", "dataset", "pv-local");
  Result<std::vector<PreparedVolume>> host = Prepare(ClaimVolume("checkpoints"));
  ASSERT_TRUE(host.ok()) << host.error().ToString();
  EXPECT_EQ((*host)[0].host_path, root_ / "pv-host");
  EXPECT_FALSE((*host)[0].read_only);
  Result<std::vector<PreparedVolume>> local = Prepare(ClaimVolume("dataset", true));
  ASSERT_TRUE(local.ok()) << local.error().ToString();
  EXPECT_EQ((*local)[0].host_path, root_ / "pv-local");
  EXPECT_TRUE((*local)[0].read_only);
}

TEST_F(VolumesTest, AMissingOrUnboundClaimIsAFailedPreconditionNamingTheClaim) {
  Result<std::vector<PreparedVolume>> missing = Prepare(ClaimVolume("checkpoints"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(missing.error().field, "spec.volumes[0].persistentVolumeClaim.claimName");
  EXPECT_THAT(missing.error().message,
              HasSubstr("PersistentVolumeClaim jobs/checkpoints does not exist"));
  references_.AddClaim("jobs", "checkpoints", "");
  Result<std::vector<PreparedVolume>> pending = Prepare(ClaimVolume("checkpoints"));
  ASSERT_FALSE(pending.ok());
  EXPECT_EQ(pending.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_THAT(pending.error().message, HasSubstr("is Pending, not bound"));
  references_.AddClaim("jobs", "checkpoints", "pv-gone");
  EXPECT_THAT(Prepare(ClaimVolume("checkpoints")).error().message,
              HasSubstr("bound to PersistentVolume pv-gone, which does not exist"));
}

TEST_F(VolumesTest, AClaimBoundToAVolumeThatIsNotOnThisHostIsRefused) {
  references_.AddPersistentVolume("pv-nfs", {{"nfs", {{"server", "nas"}, {"path", "/x"}}}});
  references_.AddClaim("jobs", "shared", "pv-nfs");
  Result<std::vector<PreparedVolume>> volumes = Prepare(ClaimVolume("shared"));
  ASSERT_FALSE(volumes.ok());
  EXPECT_EQ(volumes.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(volumes.error().message, HasSubstr("neither hostPath nor local"));
  // A local volume's directory must exist; a hostPath's is checked against its type.
  references_.AddPersistentVolume("pv-local", {{"local", {{"path", (root_ / "absent").string()}}}});
  references_.AddClaim("jobs", "shared", "pv-local");
  EXPECT_EQ(Prepare(ClaimVolume("shared")).error().field,
            "PersistentVolume pv-local spec.local.path");
  references_.AddPersistentVolume(
      "pv-host",
      {{"hostPath", {{"path", (root_ / "new").string()}, {"type", "DirectoryOrCreate"}}}});
  references_.AddClaim("jobs", "shared", "pv-host");
  ASSERT_TRUE(Prepare(ClaimVolume("shared")).ok());
  EXPECT_TRUE(fs::is_directory(root_ / "new"));
  // A relative path is refused before anything is created (it would be the agent's own folder).
  references_.AddPersistentVolume(
      "pv-relative", {{"hostPath", {{"path", "relative-pv"}, {"type", "DirectoryOrCreate"}}}});
  references_.AddClaim("jobs", "shared", "pv-relative");
  Result<std::vector<PreparedVolume>> relative = Prepare(ClaimVolume("shared"));
  ASSERT_FALSE(relative.ok());
  EXPECT_EQ(relative.error().field, "PersistentVolume pv-relative spec.hostPath.path");
  EXPECT_FALSE(fs::exists("relative-pv"));
}

TEST_F(VolumesTest, EmptyDirIsADirectoryWhoseContentsSurviveARefresh) {
  const Json volumes = Json::array({{{"name", "scratch"}, {"emptyDir", Json::object()}},
                                    {{"name", "shm"}, {"emptyDir", {{"medium", "Memory"}}}}});
  Result<std::vector<PreparedVolume>> prepared = Prepare(volumes);
  ASSERT_TRUE(prepared.ok()) << prepared.error().ToString();
  EXPECT_TRUE(fs::is_directory(VolumeDir("scratch")));
  EXPECT_TRUE(fs::is_directory(VolumeDir("shm")));
  EXPECT_FALSE((*prepared)[0].read_only);
  std::ofstream(VolumeDir("scratch") / "checkpoint") << "step 7";
  ASSERT_TRUE(Prepare(volumes).ok());
  EXPECT_EQ(ReadFile(VolumeDir("scratch") / "checkpoint"), "step 7");
}

class HostPathTest : public VolumesTest {
 protected:
  Result<std::vector<PreparedVolume>> PrepareHostPath(const fs::path& path,
                                                      const std::string& type) {
    return Prepare(
        Json::array({{{"name", "host"}, {"hostPath", {{"path", path.string()}, {"type", type}}}}}));
  }
  void ExpectTypeCheckFails(const fs::path& path, const std::string& type, const std::string& why) {
    Result<std::vector<PreparedVolume>> volumes = PrepareHostPath(path, type);
    ASSERT_FALSE(volumes.ok()) << type << " " << path;
    EXPECT_EQ(volumes.error().code, ErrorCode::kFailedPrecondition) << type;
    EXPECT_EQ(volumes.error().field, "spec.volumes[0].hostPath.type") << type;
    EXPECT_THAT(volumes.error().message, HasSubstr(why)) << type;
  }
};

TEST_F(HostPathTest, IsTheHostPathItself) {
  Result<std::vector<PreparedVolume>> volumes = PrepareHostPath(root_, "Directory");
  ASSERT_TRUE(volumes.ok()) << volumes.error().ToString();
  EXPECT_EQ((*volumes)[0].host_path, root_);
  EXPECT_FALSE((*volumes)[0].read_only);
}

TEST_F(HostPathTest, UnsetTypeChecksNothing) {
  EXPECT_TRUE(PrepareHostPath(root_ / "nothing-here", "").ok());
  EXPECT_FALSE(fs::exists(root_ / "nothing-here"));
}

TEST_F(HostPathTest, DirectoryOrCreateCreatesAMissingDirectory) {
  ASSERT_TRUE(PrepareHostPath(root_ / "a" / "b", "DirectoryOrCreate").ok());
  EXPECT_TRUE(fs::is_directory(root_ / "a" / "b"));
  std::ofstream(root_ / "file") << "x";
  ExpectTypeCheckFails(root_ / "file", "DirectoryOrCreate", "is not a directory");
}

TEST_F(HostPathTest, FileOrCreateCreatesAMissingFileButNotItsParent) {
  ASSERT_TRUE(PrepareHostPath(root_ / "new-file", "FileOrCreate").ok());
  EXPECT_TRUE(fs::is_regular_file(root_ / "new-file"));
  ExpectTypeCheckFails(root_ / "no-parent" / "f", "FileOrCreate", "could not be created");
  EXPECT_FALSE(fs::exists(root_ / "no-parent"));
  ExpectTypeCheckFails(root_, "FileOrCreate", "is not a file");
}

TEST_F(HostPathTest, ExistingTypesMustExistAndMatch) {
  std::ofstream(root_ / "file") << "x";
  ExpectTypeCheckFails(root_ / "missing", "Directory", "does not exist");
  ExpectTypeCheckFails(root_ / "file", "Directory", "is not a directory");
  ExpectTypeCheckFails(root_ / "missing", "File", "does not exist");
  ExpectTypeCheckFails(root_, "File", "is not a file");
  ExpectTypeCheckFails(root_ / "file", "Socket", "is not a socket");
  ExpectTypeCheckFails(root_ / "file", "CharDevice", "is not a character device");
  ExpectTypeCheckFails("/dev/null", "BlockDevice", "is not a block device");
  EXPECT_TRUE(PrepareHostPath(root_ / "file", "File").ok());
  EXPECT_TRUE(PrepareHostPath("/dev/null", "CharDevice").ok());
}

TEST_F(HostPathTest, SocketTypeAcceptsAUnixSocket) {
  const fs::path socket_path = root_ / "s.sock";
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(socket_path.string().size(), sizeof(address.sun_path));
  socket_path.string().copy(address.sun_path, sizeof(address.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  Result<std::vector<PreparedVolume>> volumes = PrepareHostPath(socket_path, "Socket");
  close(fd);
  EXPECT_TRUE(volumes.ok()) << volumes.error().ToString();
}

TEST_F(HostPathTest, RefusesAnUnknownTypeAndARelativePath) {
  Result<std::vector<PreparedVolume>> unknown = PrepareHostPath(root_, "Dir");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(unknown.error().field, "spec.volumes[0].hostPath.type");
  Result<std::vector<PreparedVolume>> relative = PrepareHostPath("relative/dir", "");
  ASSERT_FALSE(relative.ok());
  EXPECT_EQ(relative.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(relative.error().field, "spec.volumes[0].hostPath.path");
}

class ContainerMountsTest : public VolumesTest {
 protected:
  void SetUp() override {
    references_.AddSecret("jobs", "creds", {{"token", "t"}});
    Result<std::vector<PreparedVolume>> prepared =
        Prepare(Json::array({{{"name", "scratch"}, {"emptyDir", Json::object()}},
                             {{"name", "creds"}, {"secret", {{"secretName", "creds"}}}}}));
    ASSERT_TRUE(prepared.ok()) << prepared.error().ToString();
    volumes_ = std::move(*prepared);
  }
  Result<std::vector<BindMount>> Mounts(const Json& volume_mounts,
                                        const std::vector<EnvVar>& environment = {}) {
    return ContainerMounts(Json{{"name", "main"}, {"volumeMounts", volume_mounts}},
                           "spec.containers[0]", volumes_, environment);
  }
  void ExpectInvalid(const Json& volume_mount, const std::string& field,
                     const std::vector<EnvVar>& environment = {}) {
    Result<std::vector<BindMount>> mounts = Mounts(Json::array({volume_mount}), environment);
    ASSERT_FALSE(mounts.ok()) << volume_mount.dump();
    EXPECT_EQ(mounts.error().code, ErrorCode::kInvalidArgument) << volume_mount.dump();
    EXPECT_EQ(mounts.error().field, field) << volume_mount.dump();
  }

  std::vector<PreparedVolume> volumes_;
};

TEST_F(ContainerMountsTest, MountsAVolumeAtItsPathWithReadOnlyAsAsked) {
  Result<std::vector<BindMount>> mounts =
      Mounts(Json::array({{{"name", "scratch"}, {"mountPath", "/scratch"}},
                          {{"name", "scratch"}, {"mountPath", "/ro"}, {"readOnly", true}}}));
  ASSERT_TRUE(mounts.ok()) << mounts.error().ToString();
  ASSERT_EQ(mounts->size(), 2u);
  EXPECT_EQ((*mounts)[0].source, VolumeDir("scratch"));
  EXPECT_EQ((*mounts)[0].target, "/scratch");
  EXPECT_FALSE((*mounts)[0].read_only);
  EXPECT_TRUE((*mounts)[1].read_only);
}

TEST_F(ContainerMountsTest, SecretVolumesAreReadOnlyWhateverTheMountSays) {
  Result<std::vector<BindMount>> mounts =
      Mounts(Json::array({{{"name", "creds"}, {"mountPath", "/creds"}}}));
  ASSERT_TRUE(mounts.ok()) << mounts.error().ToString();
  EXPECT_TRUE((*mounts)[0].read_only);
}

TEST_F(ContainerMountsTest, SubPathCreatesAMissingDirectoryInsideTheVolume) {
  Result<std::vector<BindMount>> mounts =
      Mounts(Json::array({{{"name", "scratch"}, {"mountPath", "/data"}, {"subPath", "runs/1"}}}));
  ASSERT_TRUE(mounts.ok()) << mounts.error().ToString();
  EXPECT_EQ((*mounts)[0].source, VolumeDir("scratch") / "runs/1");
  EXPECT_TRUE(fs::is_directory(VolumeDir("scratch") / "runs/1"));
}

TEST_F(ContainerMountsTest, SubPathCanNameOneFileOfTheVolume) {
  Result<std::vector<BindMount>> mounts =
      Mounts(Json::array({{{"name", "creds"}, {"mountPath", "/etc/token"}, {"subPath", "token"}}}));
  ASSERT_TRUE(mounts.ok()) << mounts.error().ToString();
  EXPECT_EQ((*mounts)[0].source, VolumeDir("creds") / "token");
  EXPECT_EQ(ReadFile((*mounts)[0].source), "t");
}

TEST_F(ContainerMountsTest, SubPathExprExpandsAgainstTheContainerEnvironment) {
  Result<std::vector<BindMount>> mounts = Mounts(
      Json::array(
          {{{"name", "scratch"}, {"mountPath", "/logs"}, {"subPathExpr", "pods/$(POD_NAME)"}}}),
      {{"POD_NAME", "trainer-0"}});
  ASSERT_TRUE(mounts.ok()) << mounts.error().ToString();
  EXPECT_EQ((*mounts)[0].source, VolumeDir("scratch") / "pods/trainer-0");
  EXPECT_TRUE(fs::is_directory(VolumeDir("scratch") / "pods/trainer-0"));
}

TEST_F(ContainerMountsTest, SubPathExprWithAnUndefinedOrEmptyVariableIsRefused) {
  ExpectInvalid({{"name", "scratch"}, {"mountPath", "/logs"}, {"subPathExpr", "$(POD_NAME)"}},
                "spec.containers[0].volumeMounts[0].subPathExpr");
  ExpectInvalid({{"name", "scratch"}, {"mountPath", "/logs"}, {"subPathExpr", "$(POD_NAME)"}},
                "spec.containers[0].volumeMounts[0].subPathExpr", {{"POD_NAME", ""}});
}

TEST_F(ContainerMountsTest, RefusesSubPathsThatLeaveTheVolume) {
  ExpectInvalid({{"name", "scratch"}, {"mountPath", "/d"}, {"subPath", "../pod"}},
                "spec.containers[0].volumeMounts[0].subPath");
  ExpectInvalid({{"name", "scratch"}, {"mountPath", "/d"}, {"subPath", "/etc"}},
                "spec.containers[0].volumeMounts[0].subPath");
  ExpectInvalid({{"name", "scratch"}, {"mountPath", "/d"}, {"subPathExpr", "$(UP)/x"}},
                "spec.containers[0].volumeMounts[0].subPathExpr", {{"UP", ".."}});
  fs::create_directory_symlink(root_, VolumeDir("scratch") / "link");
  ExpectInvalid({{"name", "scratch"}, {"mountPath", "/d"}, {"subPath", "link"}},
                "spec.containers[0].volumeMounts[0].subPath");
}

TEST_F(ContainerMountsTest, RefusesARelativeMountPath) {
  ExpectInvalid({{"name", "scratch"}, {"mountPath", "data"}},
                "spec.containers[0].volumeMounts[0].mountPath");
}

TEST_F(ContainerMountsTest, RefusesAMountOfAnUnknownVolume) {
  Result<std::vector<BindMount>> mounts =
      Mounts(Json::array({{{"name", "nope"}, {"mountPath", "/x"}}}));
  ASSERT_FALSE(mounts.ok());
  EXPECT_EQ(mounts.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(mounts.error().field, "spec.containers[0].volumeMounts[0].name");
  EXPECT_THAT(mounts.error().message, HasSubstr("no volume named \"nope\""));
}

}  // namespace
}  // namespace fulcrum::local_node
