#include "bench/coordinator/process_usage.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace fulcrum::bench {

Result<ProcessUsage> ReadProcessUsage(pid_t pid) {
  const std::string directory = "/proc/" + std::to_string(pid);
  ProcessUsage usage;
  std::ifstream stat_file(directory + "/stat");
  std::string stat;
  if (!std::getline(stat_file, stat)) {
    return InvalidArgument("pid", "no process " + std::to_string(pid) + " to measure");
  }
  // The command name (field 2) is in parentheses and may hold spaces: fields are counted from
  // the last ')', after which field 3 (state) comes; utime and stime are fields 14 and 15.
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  long long utime = 0;
  long long stime = 0;
  for (int number = 3; number <= 15 && fields >> field; ++number) {
    if (number == 14) utime = std::stoll(field);
    if (number == 15) stime = std::stoll(field);
  }
  usage.cpu_seconds =
      static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  std::ifstream status_file(directory + "/status");
  for (std::string line; std::getline(status_file, line);) {
    std::istringstream words(line);
    std::string key;
    words >> key;
    if (key == "VmRSS:") {
      double kib = 0;
      words >> kib;
      usage.rss_mib = kib / 1024.0;
    } else if (key == "Threads:") {
      words >> usage.threads;
    }
  }
  return usage;
}

double SelfCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace fulcrum::bench
