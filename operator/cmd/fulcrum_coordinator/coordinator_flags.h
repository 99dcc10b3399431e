// Command line of fulcrum-coordinator (CLI11), parsed and validated (errors name the flag).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "operator/coordinator/job_session_config.h"

namespace fulcrum::coordinator {

struct CoordinatorFlags {
  std::string listen;
  std::string job_token_file;
  std::string state_file;  // JSON snapshot of every job, rewritten twice a second
  // TLS: the serving certificate chain and its key (PEM files); or plaintext with insecure.
  std::string tls_certificate_file;
  std::string tls_key_file;
  bool insecure = false;
  JobSessionConfig job_template;  // everything but name and token, shared by all jobs
};

// `args` without the program name. --help comes back as an error whose field is "--help" and
// whose message is the help text.
Result<CoordinatorFlags> ParseCoordinatorFlags(const std::vector<std::string>& args);

}  // namespace fulcrum::coordinator
