#include "operator/cmd/fulcrum_operator/operator_config.h"

#include <absl/strings/ascii.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_replace.h>
#include <absl/strings/str_split.h>
#include <absl/time/time.h>
#include <arpa/inet.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <functional>
#include <map>

#include "common/command_line.h"
#include "operator/kube/leaderelection/leader_elector.h"

namespace fulcrum::operator_main {
namespace {

// An RFC 1123 label, as Kubernetes names namespaces and Services: [a-z0-9]([-a-z0-9]*[a-z0-9])?,
// at most 63 characters.
bool IsDnsLabel(std::string_view text) {
  if (text.empty() || text.size() > 63 || text.front() == '-' || text.back() == '-') return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-';
  });
}

// Applies one value; `where` names its source for errors (a YAML key or a flag).
using Apply =
    std::function<Status(OperatorConfig&, const std::string& value, const std::string& where)>;

struct Setting {
  std::string key;   // in the YAML file, dotted: leaderElection.leaseDuration
  std::string flag;  // --leader-elect-lease-duration
  std::string help;
  Apply apply;
};

Apply Text(std::string OperatorConfig::*field) {
  return [field](OperatorConfig& config, const std::string& value, const std::string&) {
    config.*field = value;
    return Ok();
  };
}

template <typename Field>
Apply Nested(Field field) {  // field(config) -> std::string&
  return [field](OperatorConfig& config, const std::string& value, const std::string&) {
    field(config) = value;
    return Ok();
  };
}

Status ParseBool(const std::string& value, const std::string& where, bool& out) {
  if (value == "true" || value == "false") {
    out = value == "true";
    return Ok();
  }
  return InvalidArgument(where, "expected true or false, got \"" + value + "\"");
}

// "15s", "500ms", "1m30s" (Go's duration syntax, as Kubernetes components take).
Status ParseDuration(const std::string& value, const std::string& where,
                     std::chrono::milliseconds& out) {
  absl::Duration duration;
  if (!absl::ParseDuration(value, &duration) || duration <= absl::ZeroDuration()) {
    return InvalidArgument(
        where, "expected a positive duration such as 15s or 500ms, got \"" + value + "\"");
  }
  out = std::chrono::milliseconds(absl::ToInt64Milliseconds(duration));
  return Ok();
}

template <typename Field>
Apply DurationOf(Field field) {  // field(config) -> std::chrono::milliseconds&
  return [field](OperatorConfig& config, const std::string& value, const std::string& where) {
    return ParseDuration(value, where, field(config));
  };
}

// A whole number in [lowest, highest].
template <typename Field>
Apply CountOf(Field field, int lowest, int highest) {  // field(config) -> an integer lvalue
  return [=](OperatorConfig& config, const std::string& value, const std::string& where) -> Status {
    int count = 0;
    const char* end = value.data() + value.size();
    if (std::from_chars(value.data(), end, count).ptr != end || count < lowest || count > highest) {
      return InvalidArgument(where, "expected a whole number in " + std::to_string(lowest) + ".." +
                                        std::to_string(highest) + ", got \"" + value + "\"");
    }
    field(config) = count;
    return Ok();
  };
}

// A rate in requests per second: a positive number, at most `highest`.
template <typename Field>
Apply RateOf(Field field, double highest) {  // field(config) -> double&
  return [=](OperatorConfig& config, const std::string& value, const std::string& where) -> Status {
    double rate = 0;
    const char* end = value.data() + value.size();
    if (std::from_chars(value.data(), end, rate).ptr != end || !(rate > 0) || rate > highest) {
      return InvalidArgument(where, "expected requests per second, a number above 0 and at most " +
                                        std::to_string(static_cast<int>(highest)) + ", got \"" +
                                        value + "\"");
    }
    field(config) = rate;
    return Ok();
  };
}

// host:port with a port in 1..65535 (host may be empty: every interface); port 0 (any free
// port, printed at start) where `any_port` allows it, for the listening addresses.
Status CheckListen(const std::string& value, const std::string& where, bool any_port) {
  const auto colon = value.rfind(':');
  int port = 0;
  const char* begin = value.data() + (colon == std::string::npos ? 0 : colon + 1);
  const char* end = value.data() + value.size();
  const int lowest = any_port ? 0 : 1;
  if (colon == std::string::npos || std::from_chars(begin, end, port).ptr != end || port < lowest ||
      port > 65535) {
    return InvalidArgument(where, "expected HOST:PORT with a port in " + std::to_string(lowest) +
                                      "..65535, got \"" + value + "\"");
  }
  return Ok();
}

const std::vector<Setting>& Settings() {
  static const std::vector<Setting> settings = {
      {"kubeconfig", "--kubeconfig", "kubeconfig file (default: the in-cluster service account)",
       Text(&OperatorConfig::kubeconfig)},
      {"watchNamespace", "--watch-namespace", "only jobs in this namespace (default: all)",
       Text(&OperatorConfig::watch_namespace)},
      {"trainerImage", "--trainer-image", "image of CPU trainer pods whose job names none",
       Text(&OperatorConfig::trainer_image)},
      {"trainerCudaImage", "--trainer-cuda-image",
       "image of GPU trainer pods (gpusPerWorker > 0) whose job names none; they get --device cuda",
       Text(&OperatorConfig::trainer_cuda_image)},
      {"trainerCudaMinComputeCapability", "--trainer-cuda-min-compute-capability",
       "the least GPU compute capability the CUDA image has kernels for, major*10+minor (75: "
       "torch cu130); GPU jobs' workers go to no node below it",
       CountOf([](OperatorConfig& c) -> int& { return c.min_compute_capability; }, 30, 200)},
      {"emulatedGpus", "--emulated-gpus",
       "true: GPU nodes are emulated (fulcrum-local-node): GPU jobs run the CPU trainer image with "
       "--device cpu",
       [](OperatorConfig& c, const std::string& v, const std::string& where) {
         return ParseBool(v, where, c.emulated_gpus);
       }},
      {"coordinator.listen", "--coordinator-listen", "where the coordinator's gRPC service listens",
       Text(&OperatorConfig::coordinator_listen)},
      {"coordinator.address", "--coordinator-address",
       "HOST:PORT trainers dial to reach the coordinator (the operator Service)",
       Text(&OperatorConfig::coordinator_address)},
      {"coordinator.service", "--coordinator-service",
       "NAMESPACE/NAME of the selector-less Service the leader points at itself",
       Text(&OperatorConfig::coordinator_service)},
      {"coordinator.advertiseIP", "--coordinator-advertise-ip",
       "this replica's IP for the coordinator Service's EndpointSlice (the pod IP)",
       Text(&OperatorConfig::coordinator_advertise_ip)},
      {"coordinator.tlsSecret", "--coordinator-tls-secret",
       "NAMESPACE/NAME of the Secret with the coordinator's CA and certificate (made if absent)",
       Text(&OperatorConfig::coordinator_tls_secret)},
      {"coordinator.insecure", "--coordinator-insecure",
       "true: serve trainers plaintext, tokens in the clear (local runs only)",
       [](OperatorConfig& c, const std::string& v, const std::string& where) {
         return ParseBool(v, where, c.coordinator_insecure);
       }},
      {"coordinator.helloTimeout", "--coordinator-hello-timeout",
       "a stream that says no Hello this long is closed (10s)",
       DurationOf([](OperatorConfig& c) -> std::chrono::milliseconds& {
         return c.coordinator_limits.hello_timeout;
       })},
      {"coordinator.maxStreams", "--coordinator-max-streams",
       "trainer streams the coordinator holds open at once (4096)",
       CountOf([](OperatorConfig& c) -> int& { return c.coordinator_limits.max_streams; }, 1,
               1'000'000)},
      {"coordinator.maxStreamsPerJob", "--coordinator-max-streams-per-job",
       "trainer streams one job may hold (512)",
       CountOf([](OperatorConfig& c) -> int& { return c.coordinator_limits.max_streams_per_job; },
               1, 1'000'000)},
      {"coordinator.maxQueuedMessages", "--coordinator-max-queued-messages",
       "unsent messages per stream before a trainer that does not read is cut off (256)",
       CountOf([](OperatorConfig& c)
                   -> std::size_t& { return c.coordinator_limits.max_queued_messages; },
               1, 1'000'000)},
      {"health.listen", "--health-listen", "/healthz and /readyz",
       Text(&OperatorConfig::health_listen)},
      {"metrics.listen", "--metrics-listen", "Prometheus /metrics",
       Text(&OperatorConfig::metrics_listen)},
      {"leaderElection.enabled", "--leader-elect", "true: only the Lease holder acts",
       [](OperatorConfig& c, const std::string& v, const std::string& where) {
         return ParseBool(v, where, c.leader_election.enabled);
       }},
      {"leaderElection.namespace", "--leader-elect-namespace", "namespace of the Lease",
       Nested([](OperatorConfig& c) -> std::string& { return c.leader_election.lease_namespace; })},
      {"leaderElection.leaseName", "--leader-elect-lease-name", "name of the Lease",
       Nested([](OperatorConfig& c) -> std::string& { return c.leader_election.lease_name; })},
      {"leaderElection.identity", "--leader-elect-identity", "this candidate (default: host name)",
       Nested([](OperatorConfig& c) -> std::string& { return c.leader_election.identity; })},
      {"leaderElection.leaseDuration", "--leader-elect-lease-duration",
       "how long a silent leader keeps the Lease (15s)",
       DurationOf([](OperatorConfig& c) -> std::chrono::milliseconds& {
         return c.leader_election.lease_duration;
       })},
      {"leaderElection.renewDeadline", "--leader-elect-renew-deadline",
       "a leader that cannot renew this long steps down (10s)",
       DurationOf([](OperatorConfig& c) -> std::chrono::milliseconds& {
         return c.leader_election.renew_deadline;
       })},
      {"leaderElection.retryPeriod", "--leader-elect-retry-period", "between attempts (2s)",
       DurationOf([](OperatorConfig& c) -> std::chrono::milliseconds& {
         return c.leader_election.retry_period;
       })},
      {"gpuLabels.product", "--gpu-product-label", "node label naming the GPU product",
       Nested([](OperatorConfig& c) -> std::string& { return c.gpu_labels.product; })},
      {"gpuLabels.memory", "--gpu-memory-label", "node label with MiB per GPU",
       Nested([](OperatorConfig& c) -> std::string& { return c.gpu_labels.memory_mib; })},
      {"gpuLabels.count", "--gpu-count-label", "node label with the GPU count",
       Nested([](OperatorConfig& c) -> std::string& { return c.gpu_labels.count; })},
      {"gpuLabels.resource", "--gpu-resource", "extended resource trainer pods request",
       Nested([](OperatorConfig& c) -> std::string& { return c.gpu_labels.resource; })},
      {"toleratedTaintKeys", "--tolerated-taint-keys",
       "comma-separated taint keys trainer pods tolerate (NoSchedule)",
       [](OperatorConfig& c, const std::string& v, const std::string&) {
         c.tolerated_taint_keys = absl::StrSplit(v, ',', absl::SkipEmpty());
         return Ok();
       }},
      {"status.minInterval", "--status-min-interval", "least time between a job's status writes",
       DurationOf(
           [](OperatorConfig& c) -> std::chrono::milliseconds& { return c.status_min_interval; })},
      {"workers", "--workers", "jobs reconciled at once",
       CountOf([](OperatorConfig& c) -> int& { return c.workers; }, 1, 64)},
      {"kubeApi.qps", "--kube-api-qps",
       "requests per second to the API server, on average (50; 200 jobs start in a minute)",
       RateOf([](OperatorConfig& c) -> double& { return c.kube_api_qps; }, 10'000)},
      {"kubeApi.burst", "--kube-api-burst", "requests to the API server at once, above qps (100)",
       CountOf([](OperatorConfig& c) -> int& { return c.kube_api_burst; }, 1, 100'000)},
  };
  return settings;
}

// Flattens the file's maps into dotted keys; a sequence becomes a comma-separated list.
Status Flatten(const YAML::Node& node, const std::string& prefix,
               std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& entry : node) {
      const std::string key = prefix.empty() ? entry.first.as<std::string>()
                                             : prefix + "." + entry.first.as<std::string>();
      if (Status status = Flatten(entry.second, key, out); !status.ok()) return status;
    }
    return Ok();
  }
  if (node.IsSequence()) {
    std::vector<std::string> items;
    for (const auto& item : node) {
      if (!item.IsScalar()) return InvalidArgument(prefix, "expected a list of strings");
      items.push_back(item.as<std::string>());
    }
    out[prefix] = absl::StrJoin(items, ",");
    return Ok();
  }
  if (node.IsScalar()) {
    out[prefix] = node.as<std::string>();
    return Ok();
  }
  return InvalidArgument(prefix, "has no value");
}

Status Validate(const OperatorConfig& config, const std::map<std::string, std::string>& names) {
  auto name = [&](const std::string& key) { return names.count(key) ? names.at(key) : key; };
  if (config.coordinator_address.empty()) {
    return InvalidArgument(name("coordinator.address"),
                           "is required: the HOST:PORT trainers dial, e.g. "
                           "fulcrum-operator.fulcrum-system.svc:7070");
  }
  if (config.coordinator_tls_secret.empty() == !config.coordinator_insecure) {
    return InvalidArgument(name("coordinator.tlsSecret"),
                           config.coordinator_insecure
                               ? "and coordinator.insecure exclude each other"
                               : "is required: NAMESPACE/NAME of the Secret for the coordinator's "
                                 "TLS certificate (the operator makes it), or coordinator.insecure "
                                 "true to serve plaintext locally");
  }
  if (!config.coordinator_tls_secret.empty()) {
    const std::vector<std::string> parts = absl::StrSplit(config.coordinator_tls_secret, '/');
    if (parts.size() != 2 || !IsDnsLabel(parts[0]) || parts[1].empty()) {
      return InvalidArgument(
          name("coordinator.tlsSecret"),
          "expected NAMESPACE/NAME of a Secret, got \"" + config.coordinator_tls_secret + "\"");
    }
  }
  for (const auto& [key, value] : {std::pair{"coordinator.listen", config.coordinator_listen},
                                   {"coordinator.address", config.coordinator_address},
                                   {"health.listen", config.health_listen},
                                   {"metrics.listen", config.metrics_listen}}) {
    const bool listening = std::string_view(key) != "coordinator.address";
    if (Status status = CheckListen(value, name(key), listening); !status.ok()) return status;
  }
  if (!config.coordinator_service.empty()) {
    const std::vector<std::string> parts = absl::StrSplit(config.coordinator_service, '/');
    if (parts.size() != 2 || !IsDnsLabel(parts[0]) || !IsDnsLabel(parts[1]))
      return InvalidArgument(
          name("coordinator.service"),
          "expected NAMESPACE/NAME of a Service, got \"" + config.coordinator_service + "\"");
    in6_addr address6{};
    in_addr address4{};
    const char* ip = config.coordinator_advertise_ip.c_str();
    const bool ipv4 = inet_pton(AF_INET, ip, &address4) == 1;
    if (!ipv4 && inet_pton(AF_INET6, ip, &address6) != 1)
      return InvalidArgument(name("coordinator.advertiseIP"),
                             "expected this replica's IP address (the pod IP, from the downward "
                             "API) with coordinator.service set, got \"" +
                                 config.coordinator_advertise_ip + "\"");
    // The API server refuses such endpoints (EndpointSlice validation); say so now.
    const bool loopback =
        ipv4 ? (ntohl(address4.s_addr) >> 24) == 127 : IN6_IS_ADDR_LOOPBACK(&address6) != 0;
    if (loopback)
      return InvalidArgument(name("coordinator.advertiseIP"),
                             "a Service endpoint may not be a loopback address, got \"" +
                                 config.coordinator_advertise_ip +
                                 "\"; leave coordinator.service unset where trainers dial the "
                                 "operator directly");
  }
  const LeaderElectionSettings& election = config.leader_election;
  if (election.enabled) {
    // The leader elector's own rule, its fields renamed to this file's keys.
    if (Status status = kube::CheckLeaseTimings(election.lease_duration, election.renew_deadline,
                                                election.retry_period);
        !status.ok()) {
      const std::vector<std::pair<std::string, std::string>> keys = {
          {"lease_duration", "leaderElection.leaseDuration"},
          {"renew_deadline", "leaderElection.renewDeadline"},
          {"retry_period", "leaderElection.retryPeriod"}};
      return InvalidArgument(name(absl::StrReplaceAll(status.error().field, keys)),
                             absl::StrReplaceAll(status.error().message, keys));
    }
    if (election.identity.empty() || election.lease_name.empty() ||
        election.lease_namespace.empty())
      return InvalidArgument(name("leaderElection.identity"),
                             "identity, lease name and namespace must not be empty");
  }
  if (config.gpu_labels.product.empty() || config.gpu_labels.resource.empty())
    return InvalidArgument(name("gpuLabels.product"),
                           "the product label and the GPU resource must be set");
  return Ok();
}

}  // namespace

Result<OperatorConfig> ParseOperatorConfig(const std::vector<std::string>& args,
                                           const std::string& host_name) {
  CLI::App app{
      "fulcrum-operator: reconciles HeteroTrainingJobs and hosts their coordinator. "
      "Settings come from --config FILE (YAML, keys as below) and flags; flags win.",
      "fulcrum-operator"};
  std::string config_file;
  app.add_option("--config", config_file, "YAML file of settings (keys in brackets below)");
  std::map<std::string, std::string> flag_values;  // flag -> value as given
  std::map<std::string, std::string> flag_of_key;  // for errors after both sources applied
  for (const Setting& setting : Settings()) {
    app.add_option(setting.flag, flag_values[setting.flag],
                   setting.help + " [" + setting.key + "]");
    flag_of_key[setting.key] = setting.flag + " / " + setting.key;
  }
  Result<CommandLine> parsed = ParseCommandLine(app, args);
  if (!parsed.ok()) return parsed.error();
  if (*parsed == CommandLine::kHelpAsked)
    return MakeError(ErrorCode::kFailedPrecondition, app.help());

  OperatorConfig config;
  config.leader_election.identity = host_name;
  if (!config_file.empty()) {
    std::map<std::string, std::string> file_values;
    try {
      const YAML::Node root = YAML::LoadFile(config_file);
      if (!root.IsNull() && !root.IsMap())
        return InvalidArgument("--config", config_file + " is not a YAML map of settings");
      if (Status status = Flatten(root, "", file_values); !status.ok()) return status.error();
    } catch (const YAML::Exception& error) {
      return InvalidArgument("--config", "cannot read " + config_file + ": " + error.what());
    }
    for (const auto& [key, value] : file_values) {
      const auto setting = std::find_if(Settings().begin(), Settings().end(),
                                        // Named: clang 14 cannot capture a structured binding.
                                        [&name = key](const Setting& s) { return s.key == name; });
      if (setting == Settings().end()) {
        std::vector<std::string> known;
        for (const Setting& s : Settings()) known.push_back(s.key);
        return InvalidArgument(config_file + ": " + key,
                               "unknown setting; known: " + absl::StrJoin(known, ", "));
      }
      if (Status status = setting->apply(config, value, config_file + ": " + key); !status.ok())
        return status.error();
    }
  }
  for (const Setting& setting : Settings()) {
    const std::string& value = flag_values[setting.flag];
    if (app.count(setting.flag) == 0) continue;
    if (Status status = setting.apply(config, value, setting.flag); !status.ok())
      return status.error();
  }
  if (Status status = Validate(config, flag_of_key); !status.ok()) return status.error();
  return config;
}

}  // namespace fulcrum::operator_main
