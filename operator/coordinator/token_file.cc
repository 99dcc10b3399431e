#include "operator/coordinator/token_file.h"

#include <fstream>
#include <sstream>

namespace fulcrum::coordinator {

Result<std::map<std::string, std::string>> ParseTokenFile(const std::string& text) {
  std::map<std::string, std::string> tokens;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    std::istringstream words(line);
    std::string job;
    std::string token;
    std::string extra;
    if (!(words >> job) || job.front() == '#') continue;
    const std::string field = "line " + std::to_string(number);
    if (!(words >> token) || (words >> extra)) {
      return InvalidArgument(field, "expected \"JOB TOKEN\" (two words)");
    }
    if (token.size() < 8) {
      return InvalidArgument(field,
                             "the token of job \"" + job + "\" is shorter than 8 characters");
    }
    if (!tokens.emplace(job, token).second) {
      return InvalidArgument(field, "job \"" + job + "\" appears twice");
    }
  }
  if (tokens.empty())
    return InvalidArgument("job-token-file", "names no job; add a line \"JOB TOKEN\"");
  return tokens;
}

Result<std::map<std::string, std::string>> ReadTokenFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return InvalidArgument("job-token-file", "cannot read \"" + path + "\"");
  std::ostringstream text;
  text << file.rdbuf();
  Result<std::map<std::string, std::string>> tokens = ParseTokenFile(text.str());
  if (!tokens.ok()) {
    Error error = tokens.error();
    error.field = "job-token-file " + path + " " + error.field;
    return error;
  }
  return tokens;
}

}  // namespace fulcrum::coordinator
