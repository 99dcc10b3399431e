// fulcrum-operator: the HeteroTrainingJob controller and the coordinator's gRPC service in one
// process, as runnables of a manager (manager.h). Every replica keeps its caches warm and serves
// /healthz, /readyz and /metrics; only the Lease holder reconciles and serves the coordinator. A
// replica that loses the lease (an API server that is down longer than the renew deadline, say)
// stops serving, forgets its jobs and campaigns again; whoever leads next re-registers every job
// from the caches, and trainers reconnect to it through the operator's address without
// restarting.
// Exit codes: 0 after SIGTERM/SIGINT, 2 invalid settings, 1 a start-up failure.
#include <absl/strings/str_split.h>
#include <absl/strings/strip.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <optional>
#include <thread>

#include "common/http_endpoints.h"
#include "common/log.h"
#include "operator/cmd/fulcrum_operator/coordinator_endpoint.h"
#include "operator/cmd/fulcrum_operator/coordinator_tls.h"
#include "operator/cmd/fulcrum_operator/manager.h"
#include "operator/cmd/fulcrum_operator/operator_config.h"
#include "operator/cmd/fulcrum_operator/operator_metrics.h"
#include "operator/controller/job_controller.h"
#include "operator/coordinator/coordinator_service.h"
#include "operator/kube/config/kubeconfig.h"
#include "operator/kube/events/event_recorder.h"
#include "operator/kube/leaderelection/leader_elector.h"
#include "operator/kube/rest/rest_client.h"
#include "operator/kube/util/clock.h"

namespace {

using namespace fulcrum;
using operator_main::Runnable;
constexpr const char* kComponent = "operator";
constexpr int kInvalidInput = 2;
constexpr int kStartFailure = 1;
constexpr auto kPhaseMetricsPeriod = std::chrono::seconds(2);

int Fail(int code, const Error& error) {
  std::cerr << "fulcrum-operator: error: "
            << (error.field.empty() ? error.message : error.field + ": " + error.message) << "\n";
  return code;
}

std::string HostName() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? std::string(name)
                                                 : std::string("fulcrum-operator");
}

Result<std::shared_ptr<kube::ApiClient>> ConnectToCluster(
    const operator_main::OperatorConfig& config) {
  Result<kube::ClusterConfig> cluster =
      kube::LoadDefaultConfig(config.kubeconfig, "", kube::ProcessEnvironment());
  if (!cluster.ok()) return Error{cluster.error().code, cluster.error().message, "kubeconfig"};
  kube::RestOptions rest_options;
  rest_options.qps = config.kube_api_qps;
  rest_options.burst = config.kube_api_burst;
  auto rest = kube::RestClient::Create(*cluster, rest_options);
  if (!rest.ok()) return Error{rest.error().code, rest.error().message, "kubeconfig"};
  return std::make_shared<kube::ApiClient>(
      std::shared_ptr<kube::RestClient>(std::move(rest).value()));
}

struct CoordinatorCredentials {
  std::optional<coordinator::PemKeyPair> serving;
  std::string ca;  // "" when the coordinator serves plaintext
};

// The coordinator's certificate, from the Secret every replica shares (made on first start), for
// the name trainers dial. Without it no trainer could verify this replica: wait for it. Nothing
// when a signal in `signals` arrived meanwhile.
std::optional<CoordinatorCredentials> AwaitCoordinatorTls(
    kube::ApiClient& client, const operator_main::OperatorConfig& config, const sigset_t& signals) {
  if (config.coordinator_tls_secret.empty()) return CoordinatorCredentials{};
  const std::vector<std::string> secret = absl::StrSplit(config.coordinator_tls_secret, '/');
  const std::string host =
      config.coordinator_address.substr(0, config.coordinator_address.rfind(':'));
  while (true) {
    Result<operator_main::CoordinatorTls> tls = operator_main::EnsureCoordinatorTls(
        client, secret[0], secret[1],
        {std::string(absl::StripPrefix(absl::StripSuffix(host, "]"), "["))});
    if (tls.ok()) return CoordinatorCredentials{tls->serving, tls->ca_certificate};
    log::Warn(kComponent, "", "cannot read or make the coordinator's TLS Secret yet; retrying",
              {{"secret", config.coordinator_tls_secret}, {"error", tls.error().ToString()}});
    timespec retry{.tv_sec = 2, .tv_nsec = 0};
    if (sigtimedwait(&signals, nullptr, &retry) > 0) return std::nullopt;
  }
}

// The coordinator's gRPC server on its address (retrying while a previous leader's process still
// holds the port) and the coordinator Service pointed at it; on stop, the server goes and the
// jobs with it (the next leader, maybe this process again, starts every job's session afresh).
Runnable CoordinatorServerRunnable(const operator_main::OperatorConfig& config,
                                   std::shared_ptr<kube::ApiClient> client,
                                   coordinator::CoordinatorService& coordinator,
                                   std::optional<coordinator::PemKeyPair> serving_tls) {
  return {
      .name = "coordinator",
      .needs_lease = true,
      .start = {},
      .run = [&config, client, &coordinator, serving_tls](std::stop_token stop) {
        std::unique_ptr<coordinator::CoordinatorServer> server;
        while (!stop.stop_requested()) {
          auto started = coordinator::CoordinatorServer::Start(config.coordinator_listen,
                                                               coordinator, serving_tls);
          if (started.ok()) {
            server = std::move(*started);
            break;
          }
          log::Warn(kComponent, "", "cannot serve the coordinator yet; retrying",
                    {{"coordinator_listen", config.coordinator_listen},
                     {"error", started.error().ToString()}});
          kube::SystemClock()->SleepFor(std::chrono::seconds(1), stop);
        }
        if (!server) return;
        log::Info(kComponent, "", "leading: coordinating and reconciling",
                  {{"coordinator_port", server->port()}});
        // Trainers reach this leader through the coordinator Service once its EndpointSlice
        // points here.
        if (!config.coordinator_service.empty()) {
          const operator_main::CoordinatorEndpoint endpoint =
              operator_main::ParseCoordinatorEndpoint(
                  config.coordinator_service, config.coordinator_advertise_ip, server->port());
          do {
            const Status published = operator_main::PublishCoordinatorEndpoint(*client, endpoint);
            if (published.ok()) {
              log::Info(kComponent, "", "the coordinator Service points at this leader",
                        {{"service", config.coordinator_service}, {"ip", endpoint.ip}});
              break;
            }
            log::Warn(
                kComponent, "", "cannot point the coordinator Service here yet; retrying",
                {{"service", config.coordinator_service}, {"error", published.error().ToString()}});
          } while (kube::SystemClock()->SleepFor(std::chrono::seconds(2), stop));
        }
        operator_main::WaitForStop(stop);
        server->Shutdown();
        for (const coordinator::JobSessionSnapshot& job : coordinator.Snapshot()) {
          (void)coordinator.RemoveJob(job.name);
        }
      }};
}

// An HTTP server (probes or metrics) for as long as the process runs.
Runnable HttpRunnable(const std::string& name, const std::string& listen, Probes probes,
                      std::function<std::string()> metrics_text, const std::string& setting) {
  auto server = std::make_shared<std::unique_ptr<HttpEndpoints>>();
  return {.name = name,
          .needs_lease = false,
          .start = [=]() -> Status {
            auto started = HttpEndpoints::Start(listen, probes, metrics_text, setting);
            if (!started.ok()) return started.error();
            *server = std::move(*started);
            log::Info(kComponent, "", name + " server listening", {{"port", (*server)->port()}});
            return Ok();
          },
          .run =
              [server](std::stop_token stop) {
                operator_main::WaitForStop(stop);
                server->reset();
              }};
}

// Leadership from the Lease: campaigns until stopped, again after each loss.
operator_main::Campaign LeaseCampaign(std::shared_ptr<kube::ApiClient> client,
                                      kube::LeaderElectionConfig election) {
  return
      [client, election](std::stop_token stop, const std::function<void(std::stop_token)>& lead) {
        kube::LeaderElectionConfig leading = election;
        leading.on_started_leading = lead;
        while (!stop.stop_requested()) {
          auto elector = kube::LeaderElector::Create(client, leading);
          if (!elector.ok()) return;
          (*elector)->Run(stop);  // returns when leadership ends, or on stop
          if (!stop.stop_requested()) {
            log::Warn(kComponent, "", "lost the lease: stopped coordinating; campaigning again");
          }
        }
      };
}

controller::JobControllerOptions ControllerOptions(const operator_main::OperatorConfig& config,
                                                   const std::string& coordinator_ca) {
  controller::JobControllerOptions options;
  options.watch_namespace = config.watch_namespace;
  options.workers = config.workers;
  options.tolerated_taint_keys = config.tolerated_taint_keys;
  options.reconciler.default_image = config.trainer_image;
  options.reconciler.default_cuda_image = config.trainer_cuda_image;
  options.reconciler.emulated_gpus = config.emulated_gpus;
  options.reconciler.min_compute_capability = config.min_compute_capability;
  options.reconciler.coordinator_address = config.coordinator_address;
  options.reconciler.coordinator_ca = coordinator_ca;
  options.reconciler.keys = config.gpu_labels;
  options.reconciler.status_min_interval = config.status_min_interval;
  // Progress is written at most this often, so a running job need not be looked at more often.
  options.reconciler.running_resync = config.status_min_interval;
  return options;
}

// Each job's phase, training and failures, as the reconciler sees them, into the metrics.
controller::JobObserver JobMetrics(operator_main::OperatorMetrics& metrics) {
  return {
      .updated =
          [&metrics](const std::string& ns, const std::string& name, controller::JobPhase phase,
                     const coordinator::JobSessionSnapshot& training, std::size_t worker_failures) {
            metrics.UpdateJob(ns, name, training,
                              {std::string(controller::ToString(phase)), worker_failures});
          },
      .removed = [&metrics](const std::string& ns,
                            const std::string& name) { metrics.RemoveJob(ns, name); },
  };
}

controller::ControllerObserver ControllerMetrics(operator_main::OperatorMetrics& metrics) {
  return {
      .reconciled = [&metrics](double seconds,
                               bool error) { metrics.ObserveReconcile(seconds, error); },
      .dequeued =
          [&metrics](std::size_t depth, double waited) {
            metrics.SetQueueDepth(depth);
            metrics.ObserveQueueLatency(waited);
          },
  };
}

kube::LeaderElectionConfig ElectionConfig(const operator_main::LeaderElectionSettings& settings) {
  kube::LeaderElectionConfig election;
  election.lease_namespace = settings.lease_namespace;
  election.lease_name = settings.lease_name;
  election.identity = settings.identity;
  election.lease_duration = settings.lease_duration;
  election.renew_deadline = settings.renew_deadline;
  election.retry_period = settings.retry_period;
  election.on_started_leading = [](std::stop_token) {};  // LeaseCampaign sets the leader's work
  election.on_new_leader = [](const std::string& identity) {
    log::Info(kComponent, "", "leader observed", {{"leader", identity}});
  };
  return election;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  Result<operator_main::OperatorConfig> config =
      operator_main::ParseOperatorConfig(args, HostName());
  if (!config.ok()) {
    if (config.error().code == ErrorCode::kFailedPrecondition) {  // --help
      std::cout << config.error().message;
      return 0;
    }
    return Fail(kInvalidInput, config.error());
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts: sigwait below

  Result<std::shared_ptr<kube::ApiClient>> client = ConnectToCluster(*config);
  if (!client.ok()) return Fail(kInvalidInput, client.error());
  const std::optional<CoordinatorCredentials> tls = AwaitCoordinatorTls(**client, *config, signals);
  if (!tls) return 0;  // stopped while waiting

  operator_main::OperatorMetrics metrics;
  // Jobs live here across leadership; the gRPC server serves them only while leading.
  coordinator::CoordinatorService coordinator(config->coordinator_limits);
  coordinator.SetStepObserver([&metrics](const coordinator::StepCompletion& completion) {
    metrics.ObserveStepDecision(std::chrono::duration<double>(completion.latency).count());
  });
  kube::EventRecorderOptions event_options;
  event_options.reporting_instance = config->leader_election.identity;
  kube::EventRecorder events(*client, event_options);

  controller::JobController controller(*client, coordinator, &events,
                                       ControllerOptions(*config, tls->ca), JobMetrics(metrics),
                                       ControllerMetrics(metrics));

  operator_main::Manager manager;
  // Every replica: warm caches, so a replica that becomes leader can act at once.
  manager.Add({.name = "informers",
               .needs_lease = false,
               .start =
                   [&controller] {
                     controller.Start();
                     return Ok();
                   },
               .run =
                   [&metrics, &controller](std::stop_token stop) {
                     do {
                       metrics.SetJobsByPhase(controller.JobsByPhase());
                     } while (kube::SystemClock()->SleepFor(kPhaseMetricsPeriod, stop));
                   }});
  manager.Add(HttpRunnable("health", config->health_listen,
                           {.healthy = [] { return Ok(); },
                            .ready = [&controller]() -> Status {
                              if (!controller.HasSynced()) {
                                return MakeError(ErrorCode::kUnavailable,
                                                 "informer caches have not synced yet");
                              }
                              return Ok();
                            }},
                           {}, "health.listen"));
  manager.Add(HttpRunnable(
      "metrics", config->metrics_listen, {}, [&metrics] { return metrics.Serialize(); },
      "metrics.listen"));
  // The leader's: the coordinator first, the controller last (stopped first).
  manager.Add(CoordinatorServerRunnable(*config, *client, coordinator, tls->serving));
  manager.Add({.name = "job-controller",
               .needs_lease = true,
               .start = {},
               .run = [&metrics, &controller](std::stop_token stop) {
                 metrics.SetLeader(true);
                 controller.Run(stop);
                 metrics.SetLeader(false);
                 metrics.RemoveAllJobs();  // the next leader exports them
               }});

  operator_main::Campaign campaign = operator_main::AlwaysLead();
  if (config->leader_election.enabled) {
    const kube::LeaderElectionConfig election = ElectionConfig(config->leader_election);
    // Fail on bad timings now, not on the first campaign.
    if (auto checked = kube::LeaderElector::Create(*client, election); !checked.ok()) {
      return Fail(kInvalidInput, checked.error());
    }
    campaign = LeaseCampaign(*client, election);
  }
  if (Status started = manager.Start(); !started.ok()) return Fail(kStartFailure, started.error());
  log::Info(kComponent, "", "started",
            {{"identity", config->leader_election.identity},
             {"coordinator_listen", config->coordinator_listen},
             {"coordinator_address", config->coordinator_address},
             {"leader_election", config->leader_election.enabled}});

  std::stop_source shutdown;
  std::jthread running([&] { manager.Run(shutdown.get_token(), campaign); });
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  log::Info(kComponent, "", "shutting down", {{"signal", signal_number}});
  shutdown.request_stop();
  running = {};
  events.Flush();
  return 0;
}
