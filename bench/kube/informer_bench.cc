// Informer initial sync and memory on many pods, for comparison with a
// client-go shared informer on the same objects (bench/kube/clientgo).
//
//   kube_informer_bench populate --kubeconfig K --namespace N --count 10000
//       creates the pods, bound to kwok nodes, and waits until they run
//   kube_informer_bench sync --kubeconfig K --namespace N
//       one informer, from start to HasSynced; prints JSON with the wall
//       time and this process's resident memory
//
// Run both through run_informer_bench.sh, which starts a cluster and runs the
// two clients alternately. Prints JSON; not a timed test.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "operator/kube/client/api_client.h"
#include "operator/kube/cache/informer.h"
#include "operator/kube/config/kubeconfig.h"

namespace fulcrum::kube {
namespace {

using Clock = std::chrono::steady_clock;

// "VmRSS:   1234 kB" from /proc/self/status.
long StatusKiB(const std::string& name) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(name + ":", 0) == 0) return std::stol(line.substr(name.size() + 1));
  }
  return -1;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Flags {
  std::string command, kubeconfig, ns = "bench";
  int count = 10000;
  int writers = 8;
  int settle_seconds = 2;
  int run_timeout_seconds = 900;
};

Result<Flags> ParseFlags(int argc, char** argv) {
  Flags flags;
  if (argc < 2)
    return InvalidArgument(
        "command",
        "usage: kube_informer_bench populate|sync --kubeconfig FILE [--namespace N] [--count N]");
  flags.command = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string name = argv[i];
    const std::string value = argv[i + 1];
    if (name == "--kubeconfig")
      flags.kubeconfig = value;
    else if (name == "--namespace")
      flags.ns = value;
    else if (name == "--count")
      flags.count = std::stoi(value);
    else if (name == "--writers")
      flags.writers = std::stoi(value);
    else if (name == "--settle-seconds")
      flags.settle_seconds = std::stoi(value);
    else if (name == "--run-timeout-seconds")
      flags.run_timeout_seconds = std::stoi(value);
    else
      return InvalidArgument(name, "unknown flag");
  }
  if (flags.kubeconfig.empty()) return InvalidArgument("--kubeconfig", "is required");
  return flags;
}

std::shared_ptr<ApiClient> Connect(const Flags& flags) {
  auto config = LoadKubeconfig(flags.kubeconfig);
  if (!config.ok()) {
    std::cerr << config.error().ToString() << "\n";
    std::exit(2);
  }
  RestOptions options;
  options.qps = 200;  // the same limits the Go baseline gets
  options.burst = 400;
  auto rest = RestClient::Create(*config, options);
  if (!rest.ok()) {
    std::cerr << rest.error().ToString() << "\n";
    std::exit(2);
  }
  return std::make_shared<ApiClient>(std::shared_ptr<RestClient>(std::move(rest).value()));
}

long CountRunning(ApiClient& client, const std::string& ns) {
  ListOptions running;
  running.field_selector = "status.phase=Running";
  running.limit = 1000;
  auto listed = client.List(resources::Pods(), ns, running);
  return listed.ok() ? static_cast<long>(listed->items.size()) : -1;
}

int Populate(const Flags& flags) {
  auto client = Connect(flags);
  (void)client->Create(
      resources::Namespaces(), "",
      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", flags.ns}}}});
  ListOptions kwok;
  kwok.label_selector = "fulcrum.dev/fake-node=kwok";
  auto nodes = client->List(resources::Nodes(), "", kwok);
  if (!nodes.ok() || nodes->items.empty()) {
    std::cerr << "no kwok nodes: " << (nodes.ok() ? "none" : nodes.error().ToString()) << "\n";
    return 1;
  }
  std::vector<std::string> node_names;
  for (const auto& node : nodes->items) node_names.push_back(NameOf(node));

  const auto start = Clock::now();
  std::atomic<int> next{0}, created{0}, failed{0};
  {
    std::vector<std::jthread> writers;
    for (int w = 0; w < flags.writers; ++w) {
      writers.emplace_back([&] {
        for (int i = next++; i < flags.count; i = next++) {
          char name[32];
          std::snprintf(name, sizeof name, "bench-%05d", i);
          // Bound to a kwok node directly: no scheduling, kwok marks it Running.
          const nlohmann::json pod = {
              {"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", name},
                {"namespace", flags.ns},
                {"labels", {{"app", "informer-bench"}, {"shard", std::to_string(i % 16)}}}}},
              {"spec",
               {{"nodeName", node_names[static_cast<std::size_t>(i) % node_names.size()]},
                {"tolerations", {{{"operator", "Exists"}}}},
                {"containers",
                 {{{"name", "main"},
                   {"image", "fulcrum-trainer:bench"},
                   {"args", {"--steps", "100"}},
                   {"resources", {{"requests", {{"cpu", "10m"}, {"memory", "16Mi"}}}}}}}}}}};
          auto result = client->Create(resources::Pods(), flags.ns, pod);
          if (result.ok() || result.error().code == ErrorCode::kAlreadyExists) {
            ++created;
          } else if (++failed <= 5) {
            std::cerr << result.error().ToString() << "\n";
          }
        }
      });
    }
  }
  const double create_seconds = SecondsSince(start);
  long running = 0;
  while (SecondsSince(start) < flags.run_timeout_seconds) {
    running = CountRunning(*client, flags.ns);
    if (running >= flags.count) break;
    std::this_thread::sleep_for(std::chrono::seconds(5));
  }
  const nlohmann::json report = {{"pods", created.load()},
                                 {"failed", failed.load()},
                                 {"create_seconds", create_seconds},
                                 {"running", running},
                                 {"until_running_seconds", SecondsSince(start)}};
  std::cout << report.dump() << std::endl;
  return failed > 0 ? 1 : 0;
}

int Sync(const Flags& flags) {
  auto client = Connect(flags);
  const auto start = Clock::now();
  InformerOptions options;
  options.ns = flags.ns;
  Informer informer(client, resources::Pods(), options);
  informer.Start();
  if (!informer.WaitForSync(std::chrono::seconds(flags.run_timeout_seconds))) {
    std::cerr << "informer did not sync\n";
    return 1;
  }
  const double sync_seconds = SecondsSince(start);
  std::this_thread::sleep_for(std::chrono::seconds(flags.settle_seconds));
  std::size_t encoded = 0;
  for (const auto& object : informer.store().List()) encoded += object.encoded_size();
  const nlohmann::json report = {
      {"client", "fulcrum kube Informer"},  {"objects", informer.store().size()},
      {"sync_seconds", sync_seconds},       {"rss_kib", StatusKiB("VmRSS")},
      {"peak_rss_kib", StatusKiB("VmHWM")}, {"cached_bytes", encoded}};
  std::cout << report.dump() << std::endl;
  return 0;
}

}  // namespace
}  // namespace fulcrum::kube

int main(int argc, char** argv) {
  auto flags = fulcrum::kube::ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::cerr << flags.error().ToString() << "\n";
    return 2;
  }
  if (flags->command == "populate") return fulcrum::kube::Populate(*flags);
  if (flags->command == "sync") return fulcrum::kube::Sync(*flags);
  std::cerr << "unknown command '" << flags->command << "'; use populate or sync\n";
  return 2;
}
