// The job token file of the standalone coordinator: one "JOB TOKEN" pair per line; blank
// lines and lines starting with '#' are ignored. The operator passes tokens from Secrets.
#pragma once

#include <map>
#include <string>

#include "common/result.h"

namespace fulcrum::coordinator {

// job name -> token
Result<std::map<std::string, std::string>> ParseTokenFile(const std::string& text);
Result<std::map<std::string, std::string>> ReadTokenFile(const std::string& path);

}  // namespace fulcrum::coordinator
