#include "operator/cmd/fulcrum_coordinator/coordinator_flags.h"

#include <CLI/CLI.hpp>
#include <cmath>

#include "common/command_line.h"

namespace fulcrum::coordinator {
namespace {

constexpr const char* kDescription =
    "fulcrum-coordinator: the coordinator alone, for local training without Kubernetes.\n"
    "--job-token-file holds one \"JOB TOKEN\" per line; every job gets the same settings.\n"
    "Serves TLS (--tls-cert, --tls-key) or, asked by name, plaintext (--insecure true).";

// A duration flag in milliseconds.
CLI::Option* AddMilliseconds(CLI::App& app, const std::string& flag, std::chrono::milliseconds& out,
                             const std::string& help) {
  return app
      .add_option_function<int64_t>(
          flag, [&out](int64_t value) { out = std::chrono::milliseconds(value); }, help)
      ->default_str(std::to_string(out.count()));
}

void AddFlags(CLI::App& app, CoordinatorFlags& flags, std::string& policy) {
  JobSessionConfig& job = flags.job_template;
  SetFlagDefaults(app);
  app.add_option("--listen", flags.listen, "HOST:PORT to serve on (port 0: any free port)");
  app.add_option("--job-token-file", flags.job_token_file, "one \"JOB TOKEN\" per line");
  app.add_option("--state-file", flags.state_file,
                 "JSON snapshot of every job, rewritten twice a second");
  app.add_option("--tls-cert", flags.tls_certificate_file, "serving certificate chain (PEM)");
  app.add_option("--tls-key", flags.tls_key_file, "its private key (PEM)");
  AddBool(app, "--insecure", flags.insecure, "true: serve plaintext (local use only)");
  app.add_option("--global-batch", job.global_batch, "every job's global batch (required)");
  app.add_option("--min-workers", job.min_workers, "workers a generation needs");
  app.add_option("--max-workers", job.max_workers, "most workers a generation takes");
  app.add_option("--policy", policy, "optimal, proportional or equal");
  app.add_option("--interval-steps", job.interval_steps, "steps between rebalance decisions");
  app.add_option("--min-gain", job.min_gain, "least predicted gain for a new plan");
  app.add_option("--seed", job.seed, "seeds the balancer's dither");
  app.add_option("--apply-lead-steps", job.min_apply_lead_steps,
                 "steps ahead a new plan is announced");
  // The time rank 0 needs to hold a plan before the step it applies to (docs/protocol.md); a
  // plan that arrives later still switches every rank at one step, just later.
  app.add_option_function<double>(
         "--apply-lead-ms", [&job](double ms) { job.apply_lead_seconds = ms / 1000.0; },
         "and at least this long ahead, in measured step time")
      ->check(CLI::NonNegativeNumber)
      ->default_str(std::to_string(std::lround(job.apply_lead_seconds * 1000.0)));
  AddMilliseconds(app, "--leave-timeout-ms", job.leave_timeout,
                  "how long a leaving worker is waited for");
  AddMilliseconds(app, "--heartbeat-timeout-ms", job.heartbeat_timeout,
                  "a silent worker is gone after this");
  AddMilliseconds(app, "--hang-timeout-ms", job.hang_timeout,
                  "a worker whose step takes longer hangs");
  AddMilliseconds(app, "--settle-ms", job.settle, "wait for more joins before a new generation");
  app.add_option("--learning-rate", job.learning_rate,
                 "every job's learning rate, sent to the trainers (0: their own --lr)");
  // spec.batching, for local runs and tests (docs/adaptive-batch.md).
  app.add_option("--adaptive-batch-min", job.batching.min_batch,
                 "with --adaptive-batch-max: choose the global batch in [min, max] for goodput, "
                 "starting at --global-batch (needs --learning-rate)");
  app.add_option("--adaptive-batch-max", job.batching.max_batch, "see --adaptive-batch-min");
  app.add_option("--adaptive-batch-dwell-steps", job.batching.min_steps_between_changes,
                 "least steps between global batch changes");
  app.add_option(
      "--adaptive-batch-max-factor", job.batching.max_factor,
      "one change moves the global batch by at most this factor (spec.batching.maxFactor)");
  app.add_option_function<std::string>(
         "--learning-rate-scaling",
         [&job](const std::string& rule) {
           job.batching.scaling = rule == "sqrt" ? balancer::LearningRateScaling::kSquareRoot
                                                 : balancer::LearningRateScaling::kAdaScale;
         },
         "adaScale or sqrt: how the learning rate follows an adaptive global batch")
      ->check(CLI::IsMember({"adaScale", "sqrt"}));
  app.add_option("--noise-half-life-steps", job.batching.noise_half_life_steps,
                 "memory of the gradient noise scale estimate, in steps");
}

}  // namespace

Result<CoordinatorFlags> ParseCoordinatorFlags(const std::vector<std::string>& args) {
  CoordinatorFlags flags;
  JobSessionConfig& job = flags.job_template;
  std::string policy;
  CLI::App app{kDescription, "fulcrum-coordinator"};
  AddFlags(app, flags, policy);
  Result<CommandLine> parsed = ParseCommandLine(app, args);
  if (!parsed.ok()) return parsed.error();
  if (*parsed == CommandLine::kHelpAsked) return InvalidArgument("--help", app.help());
  if (!policy.empty()) {
    Result<balancer::PolicyKind> kind = balancer::ParsePolicyKind(policy, "--policy");
    if (!kind.ok()) return kind.error();
    job.policy = *kind;
  }
  if (flags.listen.empty()) return InvalidArgument("--listen", "is required, e.g. 127.0.0.1:50051");
  if (flags.job_token_file.empty()) return InvalidArgument("--job-token-file", "is required");
  if (job.global_batch < 1)
    return InvalidArgument("--global-batch", "is required and must be >= 1");
  const bool tls = !flags.tls_certificate_file.empty() || !flags.tls_key_file.empty();
  if (tls == flags.insecure) {
    return InvalidArgument("--tls-cert", flags.insecure
                                             ? "and --insecure true exclude each other"
                                             : "is required with --tls-key (PEM files), or "
                                               "--insecure true to serve plaintext locally");
  }
  if (tls && (flags.tls_certificate_file.empty() || flags.tls_key_file.empty())) {
    return InvalidArgument(flags.tls_key_file.empty() ? "--tls-key" : "--tls-cert",
                           "--tls-cert and --tls-key go together");
  }
  job.batching.enabled = job.batching.min_batch > 0 || job.batching.max_batch > 0;
  job.name = "template";
  job.token = "template-token";
  if (Status status = ValidateJobConfig(job); !status.ok()) {
    Error error = status.error();
    error.field = "--" + error.field;
    return error;
  }
  return flags;
}

}  // namespace fulcrum::coordinator
