// What a process costs, read from /proc: CPU seconds so far, resident memory, threads. The
// benchmark reads the coordinator's process before and after a window and reports the change.
#pragma once

#include <sys/types.h>

#include "common/result.h"

namespace fulcrum::bench {

struct ProcessUsage {
  double cpu_seconds = 0.0;  // user + system, all threads
  double rss_mib = 0.0;
  int threads = 0;
};

Result<ProcessUsage> ReadProcessUsage(pid_t pid);
// CPU seconds (user + system) this process has used, all threads.
double SelfCpuSeconds();

}  // namespace fulcrum::bench
