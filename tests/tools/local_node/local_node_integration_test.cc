// fulcrum-local-node against a real control plane (tests/cluster/up --local-nodes
// test-nodes.yaml): pods created through the API server, bound by kube-scheduler,
// run as local processes, reported, logged, deleted and adopted as kubelet does.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "tests/support/polling.h"
#include "tests/support/temporary_directory.h"
#include "tests/support/test_cluster.h"

namespace fulcrum::local_node {
namespace {

using fulcrum::testing::Cluster;
using fulcrum::testing::CommandResult;
using fulcrum::testing::ReadFile;
using fulcrum::testing::RunShell;
using fulcrum::testing::ShellQuote;
using fulcrum::testing::WaitUntil;
using namespace std::chrono_literals;

bool ProcessAlive(int pid) {
  return pid > 0 && ::kill(pid, 0) == 0;
}

// Each test works in a namespace of its own and a host folder its pods can write to.
class LocalNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ns_ = "t-";
    for (char c : name) ns_ += static_cast<char>(std::tolower(c));
    ns_ = ns_.substr(0, 60);
    ASSERT_EQ(Cluster().Kubectl("create namespace " + ns_).exit_code, 0);
    ASSERT_TRUE(WaitUntil(
        [&] { return Cluster().Kubectl("get serviceaccount default -n " + ns_).exit_code == 0; },
        60s));
  }
  void TearDown() override { Cluster().Kubectl("delete namespace " + ns_ + " --wait=false"); }

  CommandResult Kubectl(const std::string& arguments) const {
    return Cluster().Kubectl("-n " + ns_ + " " + arguments);
  }

  void Apply(const nlohmann::json& object) const {
    const std::string file = host_dir_ + "/apply.json";
    std::ofstream(file) << object.dump();
    const CommandResult applied = Kubectl("apply -f " + ShellQuote(file));
    ASSERT_EQ(applied.exit_code, 0) << applied.output;
  }

  // A pod running `script` with sh on the node with GPU `product`; the host folder is at /record.
  // (Kubernetes expands `$$` in a command to `$`: a shell's own pid is `$$$$` here.)
  nlohmann::json ShellPod(const std::string& name, const std::string& product,
                          const std::string& script,
                          const std::string& restart_policy = "Never") const {
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}, {"namespace", ns_}}},
            {"spec",
             {{"restartPolicy", restart_policy},
              {"terminationGracePeriodSeconds", 3},
              {"nodeSelector", {{"nvidia.com/gpu.product", product}}},
              {"volumes",
               {{{"name", "record"}, {"hostPath", {{"path", host_dir_}, {"type", "Directory"}}}}}},
              {"containers",
               {{{"name", "main"},
                 {"image", "busybox"},
                 {"command", {"sh", "-c", script}},
                 {"env",
                  {{{"name", "POD_IP"},
                    {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}}}},
                 {"volumeMounts", {{{"name", "record"}, {"mountPath", "/record"}}}}}}}}}};
  }

  nlohmann::json GetPod(const std::string& name) const {
    const CommandResult got = Kubectl("get pod " + name + " -o json");
    if (got.exit_code != 0) return nullptr;
    return nlohmann::json::parse(got.output, nullptr, false);
  }

  std::string Phase(const std::string& name) const {
    const nlohmann::json pod = GetPod(name);
    return pod.is_object() ? pod["status"].value("phase", "") : "";
  }

  bool WaitForPhase(const std::string& name, const std::string& phase,
                    std::chrono::seconds timeout = 60s) const {
    return WaitUntil([&] { return Phase(name) == phase; }, timeout);
  }

  nlohmann::json ContainerStatus(const std::string& name) const {
    const nlohmann::json pod = GetPod(name);
    if (!pod.is_object() || !pod["status"].contains("containerStatuses"))
      return nlohmann::json::object();
    return pod["status"]["containerStatuses"][0];
  }

  bool Gone(const std::string& name) const { return Kubectl("get pod " + name).exit_code != 0; }

  // A running pod whose script records SIGTERM in /record/signals and does not exit on it, so
  // only SIGKILL ends it; returns its shell's pid.
  int StartPodThatIgnoresSigterm(const std::string& name) const {
    Apply(ShellPod(name, "A100-SXM4-40GB",
                   "echo $$$$ > /record/pid; trap 'echo TERM >> /record/signals' TERM; "
                   "while true; do sleep 0.2; done"));
    EXPECT_TRUE(WaitForPhase(name, "Running")) << GetPod(name).dump(1);
    return RecordedPid("pid");
  }
  bool WaitForRecordedSigterm() const {
    return WaitUntil(
        [&] { return ReadFile(host_dir_ + "/signals").find("TERM") != std::string::npos; }, 30s);
  }

  // A pid the pod's script wrote to /record/<file>, once it is there.
  int RecordedPid(const std::string& file) const {
    int pid = 0;
    WaitUntil(
        [&] { return std::istringstream(ReadFile(host_dir_ + "/" + file)) >> pid && pid > 0; },
        60s);
    return pid;
  }

  std::string ns_;
  fulcrum::testing::TemporaryDirectory temp_{"fulcrum-local-node-test"};
  const std::string host_dir_ = temp_.path().string();
};

TEST_F(LocalNodeTest, APodForTheT4IsScheduledThereRunsAndSucceedsWithExitCodeZero) {
  nlohmann::json pod = ShellPod("ok", "Tesla-T4", "echo done");
  pod["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", "1"}}}};
  Apply(pod);
  ASSERT_TRUE(WaitForPhase("ok", "Succeeded")) << GetPod("ok").dump(1);
  pod = GetPod("ok");
  EXPECT_EQ(pod["spec"]["nodeName"], "t4-local-0");
  EXPECT_EQ(pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 0);
  EXPECT_EQ(pod["status"]["containerStatuses"][0]["state"]["terminated"]["reason"], "Completed");
  EXPECT_EQ(pod["status"]["hostIP"], "127.0.0.1");
}

TEST_F(LocalNodeTest, APodThatExitsThreeEndsFailedWithExitCodeThree) {
  Apply(ShellPod("three", "Tesla-T4", "exit 3"));
  ASSERT_TRUE(WaitForPhase("three", "Failed")) << GetPod("three").dump(1);
  const nlohmann::json terminated = ContainerStatus("three")["state"]["terminated"];
  EXPECT_EQ(terminated["exitCode"], 3);
  EXPECT_EQ(terminated["reason"], "Error");
  EXPECT_FALSE(terminated.value("finishedAt", "").empty());
}

TEST_F(LocalNodeTest, TheProcessSeesItsEnvironmentSecretVolumeAndPodIp) {
  Apply({{"apiVersion", "v1"},
         {"kind", "Secret"},
         {"metadata", {{"name", "creds"}, {"namespace", ns_}}},
         {"stringData", {{"password", "s3cret"}, {"token", "tok-123"}}}});
  Apply({{"apiVersion", "v1"},
         {"kind", "ConfigMap"},
         {"metadata", {{"name", "settings"}, {"namespace", ns_}}},
         {"data", {{"mode", "fast"}}}});
  nlohmann::json pod =
      ShellPod("env", "A100-SXM4-40GB",
               "echo plain=$PLAIN secret=$PASSWORD config=$MODE name=$MY_NAME ns=$MY_NS "
               "ip=$POD_IP node=$MY_NODE; echo file=$(cat /etc/creds/token)");
  auto& container = pod["spec"]["containers"][0];
  container["env"].push_back({{"name", "PLAIN"}, {"value", "hello-$(MY_NAME)"}});
  container["env"].push_back(
      {{"name", "PASSWORD"},
       {"valueFrom", {{"secretKeyRef", {{"name", "creds"}, {"key", "password"}}}}}});
  container["env"].push_back(
      {{"name", "MODE"},
       {"valueFrom", {{"configMapKeyRef", {{"name", "settings"}, {"key", "mode"}}}}}});
  container["env"].push_back(
      {{"name", "MY_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}});
  container["env"].push_back(
      {{"name", "MY_NS"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}});
  container["env"].push_back(
      {{"name", "MY_NODE"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nodeName"}}}}}});
  // PLAIN refers to MY_NAME, defined after it: stays literal, as Kubernetes expands only earlier
  // variables.
  pod["spec"]["volumes"].push_back({{"name", "creds"}, {"secret", {{"secretName", "creds"}}}});
  container["volumeMounts"].push_back(
      {{"name", "creds"}, {"mountPath", "/etc/creds"}, {"readOnly", true}});
  Apply(pod);
  ASSERT_TRUE(WaitForPhase("env", "Succeeded")) << GetPod("env").dump(1);
  const std::string pod_ip = GetPod("env")["status"]["podIP"];
  EXPECT_EQ(pod_ip.rfind("127.", 0), 0u) << pod_ip;
  const CommandResult logs = Kubectl("logs env");
  ASSERT_EQ(logs.exit_code, 0) << logs.output;
  EXPECT_NE(logs.output.find("plain=hello-$(MY_NAME) secret=s3cret config=fast name=env ns=" + ns_ +
                             " ip=" + pod_ip + " node=a100-local-0"),
            std::string::npos)
      << logs.output;
  EXPECT_NE(logs.output.find("file=tok-123"), std::string::npos) << logs.output;
  // The secret was mounted in the pod's own mount namespace, not on the host.
  EXPECT_FALSE(std::filesystem::exists("/etc/creds/token"));
}

TEST_F(LocalNodeTest, TwoPodsOnOneNodeListenOnTheSamePortEachOnItsOwnIpAndBecomeReady) {
  for (const std::string name : {"web-a", "web-b"}) {
    nlohmann::json pod = ShellPod(
        name, "A100-SXM4-40GB",
        "mkdir -p /tmp/" + name + " && echo " + name + " > /tmp/" + name +
            "/index.html && exec python3 -m http.server 18080 --bind $POD_IP --directory /tmp/" +
            name);
    pod["spec"]["containers"][0]["readinessProbe"] = {
        {"httpGet", {{"path", "/index.html"}, {"port", 18080}}}, {"periodSeconds", 1}};
    Apply(pod);
  }
  for (const std::string name : {"web-a", "web-b"}) {
    ASSERT_TRUE(WaitUntil([&] { return ContainerStatus(name).value("ready", false); }, 60s))
        << GetPod(name).dump(1);
  }
  const std::string ip_a = GetPod("web-a")["status"]["podIP"],
                    ip_b = GetPod("web-b")["status"]["podIP"];
  EXPECT_NE(ip_a, ip_b);
  EXPECT_EQ(GetPod("web-a")["spec"]["nodeName"], GetPod("web-b")["spec"]["nodeName"]);
  EXPECT_EQ(RunShell("curl -fsS http://" + ip_a + ":18080/index.html").output, "web-a\n");
  EXPECT_EQ(RunShell("curl -fsS http://" + ip_b + ":18080/index.html").output, "web-b\n");
}

TEST_F(LocalNodeTest, ExecAndTcpProbesDecideReadinessAndExecRunsInThePodsMountNamespace) {
  // The exec probe looks for a file in an emptyDir mounted at /scratch: only a command in the
  // pod's own mount namespace can see it. The file appears once the test has seen the pod not
  // ready (it writes /record/go), not after a fixed delay that a loaded machine can outlast.
  nlohmann::json exec_pod = ShellPod(
      "exec-probed", "A100-SXM4-40GB",
      "while [ ! -f /record/go ]; do sleep 0.2; done; touch /scratch/ready; sleep 600");
  exec_pod["spec"]["volumes"].push_back(
      {{"name", "scratch"}, {"emptyDir", nlohmann::json::object()}});
  exec_pod["spec"]["containers"][0]["volumeMounts"].push_back(
      {{"name", "scratch"}, {"mountPath", "/scratch"}});
  exec_pod["spec"]["containers"][0]["readinessProbe"] = {
      {"exec", {{"command", {"test", "-f", "/scratch/ready"}}}}, {"periodSeconds", 1}};
  Apply(exec_pod);
  nlohmann::json tcp_pod =
      ShellPod("tcp-probed", "A100-SXM4-40GB",
               "sleep 2; exec python3 -m http.server 18081 --bind $POD_IP --directory /tmp");
  tcp_pod["spec"]["containers"][0]["readinessProbe"] = {{"tcpSocket", {{"port", 18081}}},
                                                        {"periodSeconds", 1}};
  Apply(tcp_pod);
  ASSERT_TRUE(WaitForPhase("exec-probed", "Running"));
  ASSERT_TRUE(WaitForPhase("tcp-probed", "Running"));
  EXPECT_FALSE(ContainerStatus("exec-probed").value("ready", true))
      << "not ready before the file exists";
  std::ofstream(host_dir_ + "/go") << "now";
  EXPECT_TRUE(WaitUntil([&] { return ContainerStatus("exec-probed").value("ready", false); }, 60s));
  EXPECT_TRUE(WaitUntil([&] { return ContainerStatus("tcp-probed").value("ready", false); }, 60s));
  EXPECT_FALSE(std::filesystem::exists("/scratch/ready"));
}

TEST_F(LocalNodeTest, TheContainerRunsInItsWorkingDirAndExecIsRefusedClearly) {
  nlohmann::json pod = ShellPod("worker", "A100-SXM4-40GB", "pwd > /record/cwd; sleep 600");
  pod["spec"]["containers"][0]["workingDir"] = host_dir_;
  Apply(pod);
  ASSERT_TRUE(WaitForPhase("worker", "Running"));
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(host_dir_ + "/cwd") == host_dir_ + "\n"; }, 30s));
  const CommandResult exec = Kubectl("exec worker -- true");
  EXPECT_NE(exec.exit_code, 0);
  EXPECT_NE(exec.output.find("not supported by fulcrum-local-node"), std::string::npos)
      << exec.output;
}

TEST_F(LocalNodeTest, EveryNodeHoldsALeaseThatIsRenewedAndAReadyCondition) {
  const auto renew_time = [] {
    const CommandResult lease =
        Cluster().Kubectl("get lease -n kube-node-lease a100-local-0 -o json");
    if (lease.exit_code != 0) return std::string();
    return nlohmann::json::parse(lease.output)["spec"].value("renewTime", "");
  };
  const std::string first = renew_time();
  ASSERT_FALSE(first.empty());
  const nlohmann::json lease = nlohmann::json::parse(
      Cluster().Kubectl("get lease -n kube-node-lease a100-local-0 -o json").output);
  EXPECT_EQ(lease["spec"]["holderIdentity"], "a100-local-0");
  EXPECT_EQ(lease["metadata"]["ownerReferences"][0]["kind"], "Node");
  EXPECT_TRUE(WaitUntil([&] { return renew_time() != first; }, 30s)) << "renewed every 10 s";
  const nlohmann::json node =
      nlohmann::json::parse(Cluster().Kubectl("get node a100-local-0 -o json").output);
  EXPECT_EQ(node["metadata"]["labels"]["fulcrum.dev/fake-node"], "local");
  EXPECT_GT(node["status"]["daemonEndpoints"]["kubeletEndpoint"].value("Port", 0), 0);
  bool ready = false;
  for (const auto& condition : node["status"]["conditions"]) {
    ready = ready || (condition["type"] == "Ready" && condition["status"] == "True");
  }
  EXPECT_TRUE(ready);
}

TEST_F(LocalNodeTest, KubectlLogsPrintsOutputAndFollowFollowsUntilTheContainerEnds) {
  Apply(ShellPod("talker", "A100-SXM4-40GB", "for i in 1 2 3 4 5; do echo line $i; sleep 1; done"));
  ASSERT_TRUE(WaitForPhase("talker", "Running"));
  ASSERT_TRUE(WaitUntil(
      [&] { return Kubectl("logs talker").output.find("line 1") != std::string::npos; }, 30s));
  const std::string before_follow = Kubectl("logs talker").output;
  EXPECT_EQ(before_follow.find("line 5"), std::string::npos)
      << "the pod finished too early for this test";
  const CommandResult followed = Kubectl("logs -f talker");  // returns once the container has ended
  EXPECT_EQ(followed.exit_code, 0) << followed.output;
  EXPECT_EQ(followed.output, "line 1\nline 2\nline 3\nline 4\nline 5\n");
  EXPECT_TRUE(WaitForPhase("talker", "Succeeded"));
}

TEST_F(LocalNodeTest, DeletingAPodSendsSigtermThenSigkillAfterTheGracePeriodThenRemovesIt) {
  const int pid = StartPodThatIgnoresSigterm("stubborn");
  ASSERT_TRUE(ProcessAlive(pid));
  ASSERT_EQ(Kubectl("delete pod stubborn --wait=false").exit_code, 0);
  ASSERT_TRUE(WaitForRecordedSigterm());
  EXPECT_TRUE(ProcessAlive(pid))
      << "SIGTERM was recorded and ignored; the process must live on until SIGKILL";
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(pid); }, 60s));
  EXPECT_TRUE(WaitUntil([&] { return Gone("stubborn"); }, 60s)) << GetPod("stubborn").dump(1);
}

TEST_F(LocalNodeTest, AForceDeleteDuringALongGracePeriodKillsAtOnce) {
  const int pid = StartPodThatIgnoresSigterm("slow-to-stop");
  ASSERT_EQ(Kubectl("delete pod slow-to-stop --grace-period=600 --wait=false").exit_code, 0);
  ASSERT_TRUE(WaitForRecordedSigterm());
  ASSERT_EQ(Kubectl("delete pod slow-to-stop --grace-period=0 --force").exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(pid); }, 60s))
      << "the force delete shortens the 600 s grace period that was running";
}

TEST_F(LocalNodeTest, OnFailureRestartsAFailingContainerWithBackOffAndCountsRestarts) {
  Apply(ShellPod("crasher", "A100-SXM4-40GB",
                 "echo run >> /record/runs; echo attempt failed; exit 1", "OnFailure"));
  bool saw_back_off = false;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const nlohmann::json status = ContainerStatus("crasher");
        if (status.contains("state") && status["state"].contains("waiting") &&
            status["state"]["waiting"].value("reason", "") == "CrashLoopBackOff") {
          saw_back_off = true;
        }
        return status.value("restartCount", 0) >= 2;
      },
      90s))
      << GetPod("crasher").dump(1);
  const nlohmann::json status = ContainerStatus("crasher");
  EXPECT_EQ(status["lastState"]["terminated"]["exitCode"], 1);
  EXPECT_TRUE(saw_back_off) << "the second restart waits in CrashLoopBackOff";
  EXPECT_EQ(Phase("crasher"), "Running");  // OnFailure: restarting, not Failed
  const std::string runs = ReadFile(host_dir_ + "/runs");
  EXPECT_GE(std::count(runs.begin(), runs.end(), '\n'), 3);
  const CommandResult previous = Kubectl("logs --previous crasher");
  EXPECT_EQ(previous.exit_code, 0) << previous.output;
  EXPECT_EQ(previous.output, "attempt failed\n");
}

TEST_F(LocalNodeTest, AlwaysRestartsAContainerEvenAfterASuccessfulExit) {
  Apply(ShellPod("repeater", "A100-SXM4-40GB", "echo run >> /record/runs; exit 0", "Always"));
  ASSERT_TRUE(
      WaitUntil([&] { return ContainerStatus("repeater").value("restartCount", 0) >= 1; }, 60s))
      << GetPod("repeater").dump(1);
  EXPECT_EQ(Phase("repeater"), "Running");
  EXPECT_EQ(ContainerStatus("repeater")["lastState"]["terminated"]["exitCode"], 0);
}

TEST_F(LocalNodeTest, AnUnknownCommandFailsThePodWithAMessageNamingIt) {
  nlohmann::json pod = ShellPod("missing", "A100-SXM4-40GB", "");
  pod["spec"]["containers"][0]["command"] = {"no-such-program-here", "--flag"};
  Apply(pod);
  ASSERT_TRUE(WaitForPhase("missing", "Failed")) << GetPod("missing").dump(1);
  const nlohmann::json terminated = ContainerStatus("missing")["state"]["terminated"];
  EXPECT_EQ(terminated["reason"], "StartError");
  EXPECT_NE(terminated.value("message", "").find("no-such-program-here"), std::string::npos)
      << terminated.dump();
}

TEST_F(LocalNodeTest, AnUnsupportedVolumeFailsThatPodNamingTheVolumeAndOthersKeepRunning) {
  Apply(ShellPod("steady", "A100-SXM4-40GB",
                 "echo $$$$ > /record/steady; while true; do sleep 1; done"));
  ASSERT_TRUE(WaitForPhase("steady", "Running"));
  nlohmann::json pod = ShellPod("nfs-user", "A100-SXM4-40GB", "true");
  pod["spec"]["volumes"].push_back(
      {{"name", "shared-data"}, {"nfs", {{"server", "10.1.2.3"}, {"path", "/x"}}}});
  Apply(pod);
  ASSERT_TRUE(WaitForPhase("nfs-user", "Failed")) << GetPod("nfs-user").dump(1);
  const nlohmann::json status = GetPod("nfs-user")["status"];
  EXPECT_NE(status.value("message", "").find("shared-data"), std::string::npos) << status.dump();
  EXPECT_NE(status.value("message", "").find("nfs"), std::string::npos) << status.dump();
  EXPECT_EQ(Phase("steady"), "Running");
  EXPECT_TRUE(ProcessAlive(RecordedPid("steady")));
}

TEST_F(LocalNodeTest, AClaimBoundByTheControllerManagerIsMountedFromItsHostPathVolume) {
  // A PersistentVolume on a host folder and a claim that kube-controller-manager's binder
  // binds to it; a pod on the claim then writes through it.
  const std::string volume = ns_.substr(0, 40) + "-pv";
  const std::string folder = host_dir_ + "/pv";
  std::filesystem::create_directories(folder);
  Apply({{"apiVersion", "v1"},
         {"kind", "PersistentVolume"},
         {"metadata", {{"name", volume}}},
         {"spec",
          {{"capacity", {{"storage", "1Gi"}}},
           {"accessModes", {"ReadWriteMany"}},
           {"storageClassName", ""},
           {"claimRef", {{"namespace", ns_}, {"name", "checkpoints"}}},
           {"hostPath", {{"path", folder}, {"type", "Directory"}}}}}});
  Apply({{"apiVersion", "v1"},
         {"kind", "PersistentVolumeClaim"},
         {"metadata", {{"name", "checkpoints"}, {"namespace", ns_}}},
         {"spec",
          {{"accessModes", {"ReadWriteMany"}},
           {"storageClassName", ""},
           {"resources", {{"requests", {{"storage", "1Gi"}}}}}}}});
  ASSERT_TRUE(WaitUntil(
      [&] { return Kubectl("get pvc checkpoints -o jsonpath={.status.phase}").output == "Bound"; },
      60s))
      << Kubectl("get pvc checkpoints -o yaml").output;
  const auto on_claim = [&](const std::string& name, const std::string& claim) {
    nlohmann::json pod = ShellPod(name, "A100-SXM4-40GB", "echo step-7 > /checkpoints/latest");
    pod["spec"]["volumes"].push_back(
        {{"name", "checkpoints"}, {"persistentVolumeClaim", {{"claimName", claim}}}});
    pod["spec"]["containers"][0]["volumeMounts"].push_back(
        {{"name", "checkpoints"}, {"mountPath", "/checkpoints"}});
    return pod;
  };
  // The scheduler holds a pod whose claim does not exist. (The writer comes once its claim is
  // bound: a pod that waited for its claim was once held 2 minutes after the binding, until
  // the namespace's deletion moved it, by kube-scheduler's requeue race between the binder's
  // two updates and its own retry, kubernetes#87145; none of ours.)
  Apply(on_claim("orphan", "no-such-claim"));
  Apply(on_claim("writer", "checkpoints"));
  ASSERT_TRUE(WaitForPhase("writer", "Succeeded", 120s)) << GetPod("writer").dump(1);
  EXPECT_EQ(ReadFile(folder + "/latest"), "step-7\n");
  EXPECT_EQ(Phase("orphan"), "Pending");
  Cluster().Kubectl("delete persistentvolume " + volume + " --wait=false");
}

TEST_F(LocalNodeTest, ChangingTheSlowdownLabelChangesTheFileARunningProcessSees) {
  Apply(ShellPod("watcher", "Tesla-T4",
                 "while true; do cat $FULCRUM_SLOWDOWN_FILE > /record/seen.tmp; "
                 "mv /record/seen.tmp /record/seen; sleep 0.2; done"));
  ASSERT_TRUE(WaitForPhase("watcher", "Running"));
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(host_dir_ + "/seen") == "4\n"; }, 30s))
      << ReadFile(host_dir_ + "/seen");
  ASSERT_EQ(Cluster()
                .Kubectl("label node t4-local-0 fulcrum.dev/emulated-slowdown=6 --overwrite")
                .exit_code,
            0);
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(host_dir_ + "/seen") == "6\n"; }, 30s))
      << ReadFile(host_dir_ + "/seen");
  // Not a number >= 1: ignored, the last good value stays.
  ASSERT_EQ(Cluster()
                .Kubectl("label node t4-local-0 fulcrum.dev/emulated-slowdown=fast --overwrite")
                .exit_code,
            0);
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(ReadFile(host_dir_ + "/seen"), "6\n");
  Cluster().Kubectl("label node t4-local-0 fulcrum.dev/emulated-slowdown=4 --overwrite");
}

TEST_F(LocalNodeTest, FulcrumTrainerRunsAloneAsAPodAndSucceeds) {
  const std::string overrides =
      nlohmann::json{{"spec",
                      {{"nodeSelector", {{"nvidia.com/gpu.product", "Tesla-T4"}}},
                       {"containers",
                        {{{"name", "trainer"},
                          {"image", "localhost/fulcrum-trainer:dev"},
                          {"env",
                           {{{"name", "POD_IP"},
                             {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}}}},
                          {"args",
                           {"--world-size", "1", "--rank", "0", "--batches", "16", "--steps",
                            "3000", "--host", "$(POD_IP)", "--rendezvous", "$(POD_IP):29500"}}}}}}}}
          .dump();
  const CommandResult run =
      Kubectl("run trainer --image=localhost/fulcrum-trainer:dev --restart=Never --overrides=" +
              ShellQuote(overrides));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // Seen running, with its progress in `kubectl logs`, then done.
  ASSERT_TRUE(WaitForPhase("trainer", "Running")) << GetPod("trainer").dump(1);
  EXPECT_TRUE(WaitUntil(
      [&] { return Kubectl("logs trainer").output.find("\"msg\":\"step\"") != std::string::npos; },
      60s));
  ASSERT_TRUE(WaitForPhase("trainer", "Succeeded", 120s))
      << GetPod("trainer").dump(1) << Kubectl("logs trainer").output;
  EXPECT_EQ(GetPod("trainer")["spec"]["nodeName"], "t4-local-0");
  const std::string logs = Kubectl("logs trainer").output;
  EXPECT_NE(logs.find("\"msg\":\"finished\""), std::string::npos) << logs;
  EXPECT_NE(logs.find("EMULATION"), std::string::npos)
      << "the T4 node's emulated slowdown reaches the trainer";
}

TEST_F(LocalNodeTest, TheAgentKilledAndRestartedAdoptsRunningPodsReportsEndedOnesAndKillsOrphans) {
  Apply(
      ShellPod("long", "A100-SXM4-40GB", "echo $$$$ > /record/long; while true; do sleep 1; done"));
  Apply(
      ShellPod("short", "A100-SXM4-40GB", "while [ ! -f /record/go ]; do sleep 0.2; done; exit 7"));
  Apply(ShellPod("orphan", "A100-SXM4-40GB",
                 "echo $$$$ > /record/orphan; while true; do sleep 1; done"));
  for (const std::string name : {"long", "short", "orphan"})
    ASSERT_TRUE(WaitForPhase(name, "Running"));
  const int long_pid = RecordedPid("long"), orphan_pid = RecordedPid("orphan");
  const std::string started_at = ContainerStatus("long")["state"]["running"]["startedAt"];

  const std::string ctl = ShellQuote(fulcrum::testing::SourcePath("tests/cluster/ctl")) +
                          " --dir " + ShellQuote(Cluster().dir);
  ASSERT_EQ(RunShell(ctl + " kill node-agent").exit_code, 0);
  // While no agent runs: one pod ends by itself, another is removed from the API outright.
  std::ofstream(host_dir_ + "/go") << "now";
  ASSERT_EQ(Kubectl("delete pod orphan --grace-period=0 --force").exit_code, 0);
  std::this_thread::sleep_for(1s);
  EXPECT_TRUE(ProcessAlive(long_pid)) << "containers outlive a killed agent";
  ASSERT_EQ(RunShell(ctl + " start node-agent").exit_code, 0);

  EXPECT_TRUE(WaitForPhase("short", "Failed", 60s)) << GetPod("short").dump(1);
  EXPECT_EQ(ContainerStatus("short")["state"]["terminated"]["exitCode"], 7);
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(orphan_pid); }, 60s))
      << "the deleted pod's process is an orphan";
  EXPECT_TRUE(ProcessAlive(long_pid));
  const nlohmann::json long_status = ContainerStatus("long");
  EXPECT_EQ(Phase("long"), "Running");
  EXPECT_EQ(long_status["restartCount"], 0);
  EXPECT_EQ(long_status["state"]["running"]["startedAt"], started_at) << "adopted, not restarted";
  EXPECT_TRUE(WaitUntil([&] { return Kubectl("logs long").exit_code == 0; }, 30s))
      << Kubectl("logs long").output;
}

TEST_F(LocalNodeTest, TheAgentStoppedWithSigtermStopsEveryProcessItStartedAndReportsThem) {
  Apply(ShellPod("stopped", "A100-SXM4-40GB",
                 "echo $$$$ > /record/pid; while true; do sleep 1; done"));
  ASSERT_TRUE(WaitForPhase("stopped", "Running"));
  const int pid = RecordedPid("pid");
  const std::string ctl = ShellQuote(fulcrum::testing::SourcePath("tests/cluster/ctl")) +
                          " --dir " + ShellQuote(Cluster().dir);
  ASSERT_EQ(RunShell(ctl + " stop node-agent").exit_code, 0);
  EXPECT_FALSE(ProcessAlive(pid));
  // "[f]" so that pgrep does not find the shell that runs it, whose command line holds the pattern.
  const CommandResult shims =
      RunShell("pgrep -f -- " + ShellQuote("[f]ulcrum-local-node shim " + Cluster().dir));
  EXPECT_NE(shims.exit_code, 0) << "shims left behind:\n" << shims.output;
  // Its last word: the container ended (SIGTERM, exit 143); restartPolicy Never makes the pod
  // Failed.
  EXPECT_EQ(ContainerStatus("stopped")["state"]["terminated"]["exitCode"], 143)
      << GetPod("stopped").dump(1);
  ASSERT_EQ(RunShell(ctl + " start node-agent").exit_code, 0);
  EXPECT_TRUE(WaitForPhase("stopped", "Failed"));
}

// Last: the node is gone for the rest of the run.
TEST_F(LocalNodeTest, ZDeletingANodeKillsItsPodsProcesses) {
  Apply(
      ShellPod("on-doomed", "NVIDIA-A10", "echo $$$$ > /record/pid; while true; do sleep 1; done"));
  ASSERT_TRUE(WaitForPhase("on-doomed", "Running"));
  const int pid = RecordedPid("pid");
  ASSERT_TRUE(ProcessAlive(pid));
  ASSERT_EQ(Cluster().Kubectl("delete node doomed-0").exit_code, 0);
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(pid); }, 60s));
}

TEST(LocalNodeBadInput, AMalformedInventoryOrADuplicateNodeNameIsRefusedWithAClearError) {
  const std::string agent =
      std::string(std::getenv("FULCRUM_BINARY_DIR")) + "/tests/tools/local_node/fulcrum-local-node";
  const fulcrum::testing::TemporaryDirectory temp("fulcrum-inventory");
  const std::string dir = temp.path().string();
  std::ofstream(dir + "/bad.yaml") << "nodes:\n  - namePrefix: t4\n    count: lots\n    gpu: "
                                      "{product: Tesla-T4, memoryMiB: 1, count: 1}\n";
  std::ofstream(dir + "/dup.yaml")
      << "nodes:\n  - {namePrefix: t4, count: 1, gpu: {product: T, memoryMiB: 1, count: 1}}\n"
         "  - {namePrefix: t4, count: 1, gpu: {product: T, memoryMiB: 1, count: 1}}\n";
  const CommandResult bad = RunShell(ShellQuote(agent) + " check-inventory " + dir + "/bad.yaml");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("nodes[0].count: must be a positive integer"), std::string::npos)
      << bad.output;
  const CommandResult dup = RunShell(ShellQuote(agent) + " check-inventory " + dir + "/dup.yaml");
  EXPECT_EQ(dup.exit_code, 2);
  EXPECT_NE(dup.output.find("t4-0"), std::string::npos) << dup.output;
  EXPECT_NE(dup.output.find("repeats"), std::string::npos) << dup.output;
  // The agent itself refuses to start on them, before touching the API.
  const CommandResult agent_run =
      RunShell(ShellQuote(agent) + " --kubeconfig " + ShellQuote(Cluster().kubeconfig()) +
               " --nodes " + dir +
               "/dup.yaml --tls-cert-file /etc/hostname "
               "--tls-private-key-file /etc/hostname --client-ca-file /etc/hostname");
  EXPECT_EQ(agent_run.exit_code, 2);
  EXPECT_NE(agent_run.output.find("repeats"), std::string::npos) << agent_run.output;
}

}  // namespace
}  // namespace fulcrum::local_node
