#include "operator/cmd/fulcrum_coordinator/coordinator_flags.h"

#include <functional>
#include <map>

#include "common/flag_parsing.h"

namespace fulcrum::coordinator {

const char* const kCoordinatorUsage =
    "usage: fulcrum-coordinator --listen HOST:PORT --job-token-file FILE --global-batch B\n"
    "         [--min-workers N] [--max-workers N] [--policy optimal|proportional|equal]\n"
    "         [--interval-steps N] [--min-gain F] [--seed N] [--leave-timeout-ms MS]\n"
    "         [--heartbeat-timeout-ms MS] [--hang-timeout-ms MS] [--settle-ms MS]\n"
    "         [--apply-lead-steps N]\n"
    "         [--state-file PATH] (--tls-cert PEM --tls-key PEM | --insecure true)\n"
    "  FILE: one \"JOB TOKEN\" per line; every job gets the same settings.\n";

namespace {

using flags::BoolFlag;
using flags::ParseNumber;
using flags::TextFlag;

Status ParseMilliseconds(const std::string& flag, const std::string& text,
                         std::chrono::milliseconds* out) {
  int64_t value = 0;
  if (Status status = ParseNumber(flag, text, &value); !status.ok()) return status;
  *out = std::chrono::milliseconds(value);
  return Ok();
}

}  // namespace

Result<CoordinatorFlags> ParseCoordinatorFlags(const std::vector<std::string>& args) {
  CoordinatorFlags flags;
  JobSessionConfig& job = flags.job_template;
  using Setter = flags::FlagSetter;
  const std::map<std::string, Setter> setters = {
      {"--listen", TextFlag(&flags.listen)},
      {"--job-token-file", TextFlag(&flags.job_token_file)},
      {"--state-file", TextFlag(&flags.state_file)},
      {"--tls-cert", TextFlag(&flags.tls_certificate_file)},
      {"--tls-key", TextFlag(&flags.tls_key_file)},
      {"--insecure", BoolFlag(&flags.insecure)},
      {"--global-batch", [&](auto& f, auto& v) { return ParseNumber(f, v, &job.global_batch); }},
      {"--min-workers", [&](auto& f, auto& v) { return ParseNumber(f, v, &job.min_workers); }},
      {"--max-workers", [&](auto& f, auto& v) { return ParseNumber(f, v, &job.max_workers); }},
      {"--interval-steps",
       [&](auto& f, auto& v) { return ParseNumber(f, v, &job.interval_steps); }},
      {"--min-gain", [&](auto& f, auto& v) { return ParseNumber(f, v, &job.min_gain); }},
      {"--seed", [&](auto& f, auto& v) { return ParseNumber(f, v, &job.seed); }},
      {"--apply-lead-steps",
       [&](auto& f, auto& v) { return ParseNumber(f, v, &job.min_apply_lead_steps); }},
      {"--leave-timeout-ms",
       [&](auto& f, auto& v) { return ParseMilliseconds(f, v, &job.leave_timeout); }},
      {"--heartbeat-timeout-ms",
       [&](auto& f, auto& v) { return ParseMilliseconds(f, v, &job.heartbeat_timeout); }},
      {"--hang-timeout-ms",
       [&](auto& f, auto& v) { return ParseMilliseconds(f, v, &job.hang_timeout); }},
      {"--settle-ms", [&](auto& f, auto& v) { return ParseMilliseconds(f, v, &job.settle); }},
      {"--policy",
       [&](auto& f, auto& v) -> Status {
         Result<balancer::PolicyKind> policy = balancer::ParsePolicyKind(v, f);
         if (!policy.ok()) return policy.error();
         job.policy = *policy;
         return Ok();
       }},
  };
  if (Status status = flags::ApplyFlags(args, setters); !status.ok()) return status.error();
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
