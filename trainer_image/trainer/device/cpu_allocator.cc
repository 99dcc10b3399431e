#include "trainer_image/trainer/device/cpu_allocator.h"

#include <malloc.h>

#include "common/log.h"

namespace fulcrum::trainer {
namespace {
// glibc's ceiling for M_MMAP_THRESHOLD on 64-bit (HEAP_MAX_SIZE / 2); above it mallopt fails.
constexpr int kMmapThresholdBytes = 32 << 20;
// Never trim the heap top while training; keep 64 MiB of slack when it grows.
constexpr int kTrimThresholdBytes = 1 << 30;
constexpr int kTopPadBytes = 64 << 20;
}  // namespace

bool KeepFreedCpuMemory(const std::string& job) {
  const bool ok = mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes) == 1 &&
                  mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes) == 1 &&
                  mallopt(M_TOP_PAD, kTopPadBytes) == 1;
  if (!ok) log::Warn("trainer", job, "the C library refused the allocator settings; continuing");
  return ok;
}

}  // namespace fulcrum::trainer
