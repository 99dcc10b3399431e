// The chart, rendered and installed for real: helm (built from its Go module) lints and renders
// it with default and non-default values, refuses values the schema does not allow naming the
// key, installs it into the local control plane, and the ServiceAccount it creates can do what
// fulcrum-operator's code does and nothing more, proven with `kubectl auth can-i` and by running
// the operator under that account's token.
#include <absl/strings/ascii.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/polling.h"
#include "tests/support/temporary_directory.h"
#include "tests/support/test_cluster.h"

namespace fulcrum {
namespace {

using testing::Cluster;
using testing::CommandResult;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunShell;
using testing::ShellQuote;
using testing::SourcePath;
using namespace std::chrono_literals;

std::string Chart() {
  return ShellQuote(SourcePath("helm/fulcrum"));
}

CommandResult Helm(const std::string& arguments) {
  return RunShell(ShellQuote(Cluster().Get("FULCRUM_HELM")) + " --kubeconfig " +
                  ShellQuote(Cluster().kubeconfig()) + " " + arguments);
}

// Every optional part on and every default changed: what a careful user might set.
const std::string kEverythingOn =
    "--set replicaCount=3 --set watchNamespace=team-a --set workers=4 "
    "--set serviceMonitor.enabled=true --set podMonitor.enabled=true "
    "--set prometheusRule.enabled=true --set prometheusRule.labels.release=kps "
    "--set image.tag=dev --set trainerImage.repository=registry.example/fulcrum-trainer "
    "--set leaderElection.leaseDuration=30s --set statusMinInterval=5s "
    "--set nodeSelector.role=control --set serviceAccount.name=fulcrum-op";

// The objects `helm template` renders, by "Kind/name". Helm's warnings (the CRD is a symlink)
// go to stderr, which is dropped.
std::map<std::string, YAML::Node> Render(const std::string& values) {
  const CommandResult rendered = Helm("template fulcrum " + Chart() +
                                      " --namespace fulcrum-system " + values + " 2>/dev/null");
  EXPECT_EQ(rendered.exit_code, 0) << rendered.output;
  std::map<std::string, YAML::Node> objects;
  for (const YAML::Node& document : YAML::LoadAll(rendered.output)) {
    if (!document.IsMap()) continue;
    objects[document["kind"].as<std::string>() + "/" +
            document["metadata"]["name"].as<std::string>()] = document;
  }
  return objects;
}

nlohmann::json ToJson(const YAML::Node& node) {
  YAML::Emitter emitter;
  emitter << YAML::DoubleQuoted << YAML::Flow << YAML::BeginSeq << node << YAML::EndSeq;
  return nlohmann::json::parse(std::string(emitter.c_str() + 1, emitter.size() - 2));
}

TEST(Chart, LintsCleanlyWithDefaultAndNonDefaultValues) {
  for (const std::string& values : {std::string(), kEverythingOn}) {
    const CommandResult lint = Helm("lint --strict " + Chart() + " " + values);
    EXPECT_EQ(lint.exit_code, 0) << values << "\n" << lint.output;
  }
}

TEST(Chart, TheOperatorDeploymentRunsHardenedWithProbesAndLeaderElection) {
  auto objects = Render("");
  ASSERT_TRUE(objects.count("Deployment/fulcrum"));
  const YAML::Node spec = objects["Deployment/fulcrum"]["spec"];
  EXPECT_EQ(spec["replicas"].as<int>(), 2);
  const YAML::Node pod = spec["template"]["spec"];
  EXPECT_EQ(pod["serviceAccountName"].as<std::string>(), "fulcrum");
  EXPECT_TRUE(pod["securityContext"]["runAsNonRoot"].as<bool>());
  EXPECT_EQ(pod["securityContext"]["seccompProfile"]["type"].as<std::string>(), "RuntimeDefault");
  const YAML::Node container = pod["containers"][0];
  EXPECT_EQ(container["image"].as<std::string>(), "fulcrum-operator:0.1.0");
  const YAML::Node security = container["securityContext"];
  EXPECT_FALSE(security["allowPrivilegeEscalation"].as<bool>());
  EXPECT_TRUE(security["readOnlyRootFilesystem"].as<bool>());
  EXPECT_EQ(security["capabilities"]["drop"][0].as<std::string>(), "ALL");
  EXPECT_EQ(container["livenessProbe"]["httpGet"]["path"].as<std::string>(), "/healthz");
  EXPECT_EQ(container["readinessProbe"]["httpGet"]["path"].as<std::string>(), "/readyz");
  EXPECT_TRUE(container["resources"]["requests"]["cpu"]);
  EXPECT_TRUE(container["resources"]["limits"]["memory"]);
  std::vector<std::string> args;
  for (const YAML::Node& arg : container["args"]) args.push_back(arg.as<std::string>());
  EXPECT_THAT(args, ::testing::Contains("--leader-elect=true"));
  EXPECT_THAT(args, ::testing::Contains("--leader-elect-identity=$(POD_NAME)"));
  EXPECT_THAT(args, ::testing::Contains("--trainer-image=fulcrum-trainer:0.1.0"));
  // GPU jobs get the CUDA build; the CPU image is for CPU jobs (and emulated GPU nodes only).
  EXPECT_THAT(args, ::testing::Contains("--trainer-cuda-image=fulcrum-trainer-cuda:0.1.0"));
  EXPECT_THAT(args, ::testing::Not(::testing::Contains("--emulated-gpus=true")));
  // Trainers dial the coordinator Service, whose EndpointSlice the leader points at itself.
  EXPECT_THAT(args, ::testing::Contains(
                        "--coordinator-address=fulcrum-coordinator.fulcrum-system.svc:7070"));
  EXPECT_THAT(args,
              ::testing::Contains("--coordinator-service=fulcrum-system/fulcrum-coordinator"));
  EXPECT_THAT(
      args, ::testing::Contains("--coordinator-tls-secret=fulcrum-system/fulcrum-coordinator-tls"));
  ASSERT_TRUE(objects.count("Service/fulcrum-coordinator"));
  EXPECT_FALSE(objects["Service/fulcrum-coordinator"]["spec"]["selector"])
      << "a selector would send trainers to standby replicas";
  EXPECT_EQ(objects["Service/fulcrum-coordinator"]["spec"]["ports"][0]["name"].as<std::string>(),
            "grpc");
  ASSERT_TRUE(objects.count("Service/fulcrum-metrics"));
  // The operator's arguments parse: the binary's own validation accepts the rendered flags
  // (with the downward API's values filled in).
  std::string command = FULCRUM_OPERATOR_BINARY;
  for (std::string arg : args) {
    for (const auto& [variable, value] :
         {std::pair{"$(POD_IP)", "10.1.2.3"}, std::pair{"$(POD_NAME)", "fulcrum-abc"}}) {
      for (std::size_t at; (at = arg.find(variable)) != std::string::npos;)
        arg.replace(at, std::string(variable).size(), value);
    }
    command += " " + ShellQuote(arg);
  }
  const CommandResult help = RunShell(command + " --help");
  EXPECT_EQ(help.exit_code, 0) << help.output;
}

TEST(Chart, OptionalPartsRenderOnlyWhenEnabledAndCarryTheirFilesVerbatim) {
  auto defaults = Render("");
  EXPECT_FALSE(defaults.count("ServiceMonitor/fulcrum"));
  EXPECT_FALSE(defaults.count("PodMonitor/fulcrum-trainers"));
  EXPECT_FALSE(defaults.count("PrometheusRule/fulcrum"));
  ASSERT_TRUE(defaults.count("ConfigMap/fulcrum-dashboard"));
  const YAML::Node dashboard = defaults["ConfigMap/fulcrum-dashboard"];
  EXPECT_EQ(dashboard["metadata"]["labels"]["grafana_dashboard"].as<std::string>(), "1");
  EXPECT_EQ(
      nlohmann::json::parse(dashboard["data"]["fulcrum.json"].as<std::string>()),
      nlohmann::json::parse(testing::ReadFile(SourcePath("helm/fulcrum/dashboards/fulcrum.json"))));

  auto everything = Render(kEverythingOn);
  ASSERT_TRUE(everything.count("ServiceMonitor/fulcrum"));
  EXPECT_TRUE(
      everything["ServiceMonitor/fulcrum"]["spec"]["endpoints"][0]["honorLabels"].as<bool>())
      << "series carry job=<HeteroTrainingJob>; without honorLabels Prometheus renames it";
  ASSERT_TRUE(everything.count("PodMonitor/fulcrum-trainers"));
  EXPECT_EQ(everything["PodMonitor/fulcrum-trainers"]["spec"]["namespaceSelector"]["matchNames"][0]
                .as<std::string>(),
            "team-a");
  ASSERT_TRUE(everything.count("PrometheusRule/fulcrum"));
  const YAML::Node rule = everything["PrometheusRule/fulcrum"];
  EXPECT_EQ(rule["metadata"]["labels"]["release"].as<std::string>(), "kps");
  EXPECT_EQ(ToJson(rule["spec"]["groups"]),
            ToJson(YAML::LoadFile(SourcePath("helm/fulcrum/alerts/fulcrum.rules.yaml"))["groups"]))
      << "the PrometheusRule is the plain rules file";
  EXPECT_EQ(everything["Deployment/fulcrum"]["spec"]["replicas"].as<int>(), 3);
  EXPECT_EQ(everything["Deployment/fulcrum"]["spec"]["template"]["spec"]["serviceAccountName"]
                .as<std::string>(),
            "fulcrum-op");
}

TEST(Chart, RbacListsExactVerbsWithoutWildcardsAndAWatchNamespaceKeepsJobRightsThere) {
  for (const std::string& values : {std::string(), kEverythingOn}) {
    for (const auto& [key, object] : Render(values)) {
      if (!object["rules"]) continue;
      for (const YAML::Node& rule : object["rules"]) {
        for (const char* field : {"apiGroups", "resources", "verbs"}) {
          for (const YAML::Node& item : rule[field]) {
            EXPECT_NE(item.as<std::string>(), "*") << key << " " << field;
          }
        }
      }
    }
  }
  auto namespaced = Render(kEverythingOn);
  // Cluster-wide, only what counting GPUs needs: nodes and pods, read-only.
  for (const YAML::Node& rule : namespaced["ClusterRole/fulcrum"]["rules"]) {
    for (const YAML::Node& verb : rule["verbs"]) {
      EXPECT_THAT(verb.as<std::string>(), ::testing::AnyOf("list", "watch"));
    }
  }
  ASSERT_TRUE(namespaced.count("Role/fulcrum-jobs"));
  EXPECT_EQ(namespaced["Role/fulcrum-jobs"]["metadata"]["namespace"].as<std::string>(), "team-a");
}

TEST(Chart, WithCertManagerACertificateKeepsTheSecretTheOperatorServesFrom) {
  EXPECT_FALSE(Render("").count("Certificate/fulcrum-coordinator")) << "off by default";
  auto objects = Render(
      "--set coordinatorTls.certManager.enabled=true "
      "--set coordinatorTls.certManager.issuerRef.name=cluster-ca "
      "--set coordinatorTls.certManager.issuerRef.kind=ClusterIssuer");
  ASSERT_TRUE(objects.count("Certificate/fulcrum-coordinator"));
  const YAML::Node spec = objects["Certificate/fulcrum-coordinator"]["spec"];
  EXPECT_EQ(spec["secretName"].as<std::string>(), "fulcrum-coordinator-tls");
  EXPECT_EQ(spec["dnsNames"][0].as<std::string>(), "fulcrum-coordinator.fulcrum-system.svc");
  EXPECT_EQ(spec["issuerRef"]["kind"].as<std::string>(), "ClusterIssuer");
  // The operator reads that Secret and trainers dial the name the certificate carries.
  std::vector<std::string> args;
  for (const YAML::Node& arg :
       objects["Deployment/fulcrum"]["spec"]["template"]["spec"]["containers"][0]["args"]) {
    args.push_back(arg.as<std::string>());
  }
  EXPECT_THAT(
      args, ::testing::Contains("--coordinator-tls-secret=fulcrum-system/fulcrum-coordinator-tls"));
  EXPECT_THAT(args, ::testing::Contains(
                        "--coordinator-address=fulcrum-coordinator.fulcrum-system.svc:7070"));
}

TEST(Chart, BothTrainerImagesRenderAndEmulatedGpusIsPassedOnlyWhenSet) {
  auto objects = Render(
      "--set trainerCudaImage.repository=registry.example/fulcrum-trainer-cuda "
      "--set trainerCudaImage.tag=cu130 --set emulatedGpus=true");
  ASSERT_TRUE(objects.count("Deployment/fulcrum"));
  std::vector<std::string> args;
  for (const YAML::Node& arg :
       objects["Deployment/fulcrum"]["spec"]["template"]["spec"]["containers"][0]["args"]) {
    args.push_back(arg.as<std::string>());
  }
  EXPECT_THAT(args, ::testing::Contains("--trainer-image=fulcrum-trainer:0.1.0"));
  EXPECT_THAT(args, ::testing::Contains(
                        "--trainer-cuda-image=registry.example/fulcrum-trainer-cuda:cu130"));
  EXPECT_THAT(args, ::testing::Contains("--emulated-gpus=true"));
}

TEST(Chart, ValuesTheSchemaForbidsAreRefusedNamingTheKey) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"--set replicaCount=-1", "/replicaCount"},
      {"--set ports.metrics=http", "/ports/metrics"},
      {"--set leaderElection.leaseDuration=soon", "/leaderElection/leaseDuration"},
      {"--set watchNamespace=Team_A", "/watchNamespace"},
      {"--set image.pullPolicy=Sometimes", "/image/pullPolicy"},
      {"--set workers=100", "/workers"},
      {"--set serviceMonitor.enabled=yes", "/serviceMonitor/enabled"},
      // cert-manager without an issuer to ask.
      {"--set coordinatorTls.certManager.enabled=true",
       "/coordinatorTls/certManager/issuerRef/name"},
      {"--set imagee.tag=dev", "imagee"},  // a typo: unknown keys are refused
      {"--set emulatedGpus=sometimes", "/emulatedGpus"},
      {"--set trainerCudaImage.repository=", "/trainerCudaImage/repository"},
  };
  for (const auto& [values, key] : refused) {
    const CommandResult result = Helm("template fulcrum " + Chart() + " " + values);
    EXPECT_NE(result.exit_code, 0) << values;
    EXPECT_THAT(result.output, HasSubstr(key)) << values;
  }
}

// kubectl auth can-i as the chart's ServiceAccount.
bool Can(const std::string& service_account, const std::string& question) {
  const CommandResult result = Cluster().Kubectl(
      "auth can-i --as=system:serviceaccount:" + service_account + " " + question);
  // The answer is the last line; kubectl warns first for cluster-scoped resources.
  std::string answer(absl::StripTrailingAsciiWhitespace(result.output));
  answer = answer.substr(answer.find_last_of('\n') + 1);
  EXPECT_TRUE(answer == "yes" || answer == "no") << question << ": " << result.output;
  return answer == "yes";
}

class ChartInstalled : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The chart's operator pods land on kwok's paper nodes (no GPU taint stops them there).
    const CommandResult install =
        Helm("install fulcrum " + Chart() +
             " --namespace fulcrum-system --create-namespace --wait --timeout 180s");
    ASSERT_EQ(install.exit_code, 0) << install.output;
    ASSERT_THAT(install.output, HasSubstr("rollout status deployment/fulcrum")) << "NOTES.txt";
    Cluster().Kubectl("create namespace team-a");
    const CommandResult scoped =
        Helm("install team-a-ops " + Chart() +
             " --namespace fulcrum-team-a --create-namespace --set watchNamespace=team-a "
             "--set replicaCount=1 --wait --timeout 180s");
    ASSERT_EQ(scoped.exit_code, 0) << scoped.output;
  }
};

TEST_F(ChartInstalled, CreatesTheCrdRbacServicesAndAnAvailableDeployment) {
  EXPECT_EQ(
      Cluster().WaitForCondition("crd/heterotrainingjobs.fulcrum.dev", "Established").exit_code, 0);
  for (const char* object :
       {"serviceaccount/fulcrum", "service/fulcrum-metrics", "service/fulcrum-coordinator",
        "role/fulcrum-leader", "rolebinding/fulcrum-leader", "configmap/fulcrum-dashboard"}) {
    EXPECT_EQ(Cluster().Kubectl("-n fulcrum-system get " + std::string(object)).exit_code, 0)
        << object;
  }
  for (const char* object : {"clusterrole/fulcrum", "clusterrolebinding/fulcrum"}) {
    EXPECT_EQ(Cluster().Kubectl(std::string("get ") + object).exit_code, 0) << object;
  }
  const CommandResult available =
      Cluster().WaitForCondition("-n fulcrum-system deployment/fulcrum", "Available");
  EXPECT_EQ(available.exit_code, 0) << available.output;
  const CommandResult status = Helm("status fulcrum --namespace fulcrum-system -o json");
  EXPECT_THAT(status.output, HasSubstr("\"status\":\"deployed\""));
}

TEST_F(ChartInstalled, HelmInstallRefusesBadValuesNamingTheKeyAndCreatesNothing) {
  const CommandResult refused =
      Helm("install refused " + Chart() +
           " --namespace fulcrum-refused --create-namespace --set workers=0");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.output, HasSubstr("/workers"));
  EXPECT_NE(Helm("status refused --namespace fulcrum-refused").exit_code, 0) << "no release";
  EXPECT_NE(Cluster().Kubectl("get clusterrole refused-fulcrum").exit_code, 0);
}

TEST_F(ChartInstalled, TheServiceAccountCanDoWhatTheOperatorDoesAndNothingMore) {
  const std::string sa = "fulcrum-system:fulcrum";
  // What the code uses (see the comment in templates/rbac.yaml).
  for (const char* allowed :
       {"list heterotrainingjobs.fulcrum.dev --all-namespaces",
        "watch heterotrainingjobs.fulcrum.dev --all-namespaces",
        "patch heterotrainingjobs.fulcrum.dev -n ml",
        "delete heterotrainingjobs.fulcrum.dev -n ml",
        "patch heterotrainingjobs.fulcrum.dev --subresource=status -n ml",
        "create pods -n ml",
        "delete pods -n ml",
        "list pods --all-namespaces",
        "watch pods --all-namespaces",
        "create secrets -n ml",
        "get secrets -n ml",
        "create services -n ml",
        "create networkpolicies.networking.k8s.io -n ml",
        "watch networkpolicies.networking.k8s.io -n ml",
        "list nodes",
        "watch nodes",
        "create events.events.k8s.io -n ml",
        "patch events.events.k8s.io -n ml",
        "create leases.coordination.k8s.io -n fulcrum-system",
        "update leases.coordination.k8s.io/fulcrum -n fulcrum-system",
        "get leases.coordination.k8s.io/fulcrum -n fulcrum-system",
        "create endpointslices.discovery.k8s.io -n fulcrum-system",
        "update endpointslices.discovery.k8s.io/fulcrum-coordinator -n fulcrum-system",
        "get secrets/fulcrum-coordinator-tls -n fulcrum-system",
        "update secrets/fulcrum-coordinator-tls -n fulcrum-system"}) {
    EXPECT_TRUE(Can(sa, allowed)) << "cannot: " << allowed;
  }
  // Nothing it does not use.
  for (const char* denied :
       {"delete nodes",
        "update nodes",
        "patch pods -n ml",
        "update pods -n ml",
        "delete secrets -n ml",
        "update secrets -n ml",
        "delete services -n ml",
        "delete networkpolicies.networking.k8s.io -n ml",
        "update networkpolicies.networking.k8s.io -n ml",
        "create heterotrainingjobs.fulcrum.dev -n ml",
        "update heterotrainingjobs.fulcrum.dev -n ml",
        "update leases.coordination.k8s.io/some-other-lease -n fulcrum-system",
        "update leases.coordination.k8s.io/kube-controller-manager -n kube-system",
        "update endpointslices.discovery.k8s.io/other -n fulcrum-system",
        "update secrets/other -n fulcrum-system",
        "create clusterroles",
        "escalate clusterroles",
        "bind clusterroles",
        "create rolebindings -n ml",
        "create pods --subresource=exec -n ml",
        "create serviceaccounts --subresource=token -n ml",
        "delete deployments.apps -n fulcrum-system",
        "get configmaps -n kube-system",
        "create customresourcedefinitions.apiextensions.k8s.io"}) {
    EXPECT_FALSE(Can(sa, denied)) << "can, but should not: " << denied;
  }
}

TEST_F(ChartInstalled, AReleaseWatchingOneNamespaceCannotReadSecretsOrChangePodsElsewhere) {
  const std::string sa = "fulcrum-team-a:team-a-ops-fulcrum";
  for (const char* allowed :
       {"get secrets -n team-a", "create pods -n team-a", "delete pods -n team-a",
        "list heterotrainingjobs.fulcrum.dev -n team-a",
        "patch heterotrainingjobs.fulcrum.dev --subresource=status -n team-a",
        "list pods --all-namespaces", "list nodes",
        "update leases.coordination.k8s.io/team-a-ops-fulcrum -n fulcrum-team-a"}) {
    EXPECT_TRUE(Can(sa, allowed)) << "cannot: " << allowed;
  }
  for (const char* denied :
       {"get secrets -n kube-system", "get secrets -n default", "list secrets --all-namespaces",
        "get secrets -n fulcrum-system", "create pods -n default", "delete pods -n kube-system",
        "list heterotrainingjobs.fulcrum.dev --all-namespaces",
        "patch heterotrainingjobs.fulcrum.dev -n default", "create events.events.k8s.io -n default",
        "update leases.coordination.k8s.io/fulcrum -n fulcrum-system"}) {
    EXPECT_FALSE(Can(sa, denied)) << "can, but should not: " << denied;
  }
}

// Enough, not only not too much: the real operator, authenticated as the namespaced release's
// ServiceAccount, leads, points the coordinator Service at itself, creates a job's pods and
// writes its status and Events, and is never refused.
TEST_F(ChartInstalled, TheOperatorDoesItsWorkWithTheServiceAccountsRightsAlone) {
  fulcrum::testing::TemporaryDirectory directory("chart-operator");
  const std::string kubeconfig = (directory.path() / "operator.kubeconfig").string();
  const CommandResult token =
      Cluster().Kubectl("-n fulcrum-team-a create token team-a-ops-fulcrum --duration=1h");
  ASSERT_EQ(token.exit_code, 0) << token.output;
  // The admin kubeconfig's server and CA, with the ServiceAccount's token as the only user.
  const std::string kubectl =
      ShellQuote(Cluster().Get("FULCRUM_KUBECTL")) + " --kubeconfig " + ShellQuote(kubeconfig);
  const std::string bearer(absl::StripTrailingAsciiWhitespace(token.output));
  const CommandResult configured =
      RunShell("cp " + ShellQuote(Cluster().kubeconfig()) + " " + ShellQuote(kubeconfig) + " && " +
               kubectl + " config set-credentials operator --token=" + ShellQuote(bearer) + " && " +
               kubectl + " config set-context --current --user=operator");
  ASSERT_EQ(configured.exit_code, 0) << configured.output;

  const std::string log = Cluster().dir + "/logs/chart-operator.log";
  testing::ChildProcess operator_process({FULCRUM_OPERATOR_BINARY,
                                          "--kubeconfig",
                                          kubeconfig,
                                          "--watch-namespace",
                                          "team-a",
                                          "--coordinator-listen",
                                          "127.0.0.1:0",
                                          "--coordinator-address",
                                          "127.0.0.1:7070",
                                          "--coordinator-service",
                                          "fulcrum-team-a/team-a-ops-fulcrum-coordinator",
                                          "--coordinator-tls-secret",
                                          "fulcrum-team-a/team-a-ops-fulcrum-coordinator-tls",
                                          "--coordinator-advertise-ip",
                                          "192.0.2.10",
                                          "--health-listen",
                                          "127.0.0.1:0",
                                          "--metrics-listen",
                                          "127.0.0.1:0",
                                          "--leader-elect-namespace",
                                          "fulcrum-team-a",
                                          "--leader-elect-lease-name",
                                          "team-a-ops-fulcrum",
                                          "--leader-elect-identity",
                                          "chart-test-operator",
                                          "--status-min-interval",
                                          "1s"},
                                         log);
  ASSERT_EQ(Cluster()
                .Kubectl("-n team-a apply -f " + SourcePath("crds/examples/mixed-gpus.yaml"))
                .exit_code,
            0);
  const auto get = [](const std::string& what, const std::string& path) {
    return Cluster().Kubectl(what + " -o jsonpath=" + ShellQuote(path)).output;
  };
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        return get("-n fulcrum-team-a get lease team-a-ops-fulcrum", "{.spec.holderIdentity}") ==
               "chart-test-operator";
      },
      60s));
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        return get("-n fulcrum-team-a get endpointslice team-a-ops-fulcrum-coordinator",
                   "{.endpoints[*].addresses[*]}") == "192.0.2.10";
      },
      60s));
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        return !get("-n team-a get pods -l app.kubernetes.io/managed-by=fulcrum-operator",
                    "{.items[*].metadata.name}")
                    .empty();
      },
      60s))
      << testing::ReadFile(log);
  EXPECT_TRUE(testing::WaitUntil(
      [&] { return !get("-n team-a get htj mixed-gpus", "{.status.phase}").empty(); }, 60s));
  // It made the coordinator's TLS Secret in its own namespace, and gave the job its CA.
  EXPECT_FALSE(
      get("-n fulcrum-team-a get secret team-a-ops-fulcrum-coordinator-tls", "{.data.tls\\.crt}")
          .empty());
  const std::string job_ca = get("-n team-a get secret mixed-gpus-token", "{.data.ca\\.crt}");
  EXPECT_FALSE(job_ca.empty());
  EXPECT_EQ(job_ca, get("-n fulcrum-team-a get secret team-a-ops-fulcrum-coordinator-tls",
                        "{.data.ca\\.crt}"));
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        return Cluster().Kubectl("-n team-a get events.events.k8s.io").output.find("mixed-gpus") !=
               std::string::npos;
      },
      60s));
  Cluster().Kubectl("-n team-a delete htj mixed-gpus --wait=true --timeout=60s");
  operator_process.Signal(SIGTERM);
  operator_process.Wait(20s);
  const std::string logged = testing::ReadFile(log);
  EXPECT_THAT(logged, Not(HasSubstr("Forbidden"))) << logged;
  EXPECT_THAT(logged, Not(HasSubstr("forbidden"))) << logged;
}

}  // namespace
}  // namespace fulcrum
