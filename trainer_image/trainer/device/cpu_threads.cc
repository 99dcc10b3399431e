#include "trainer_image/trainer/device/cpu_threads.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include "common/log.h"

namespace fulcrum::trainer {
namespace {

// Looked up at run time rather than linked: which BLAS libtorch uses is the build's choice, and
// OpenBLAS has no header in the image.
template <typename Function>
Function* LookUp(const char* name) {
  return reinterpret_cast<Function*>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

int SetCpuMathThreads(int threads, const std::string& job) {
  torch::set_num_threads(threads);
  auto* set = LookUp<void(int)>("openblas_set_num_threads");
  auto* get = LookUp<int()>("openblas_get_num_threads");
  if (set == nullptr || get == nullptr) return 0;
  const int before = get();
  set(threads);
  const int after = get();
  if (before != after) {
    log::Info("trainer", job, "OpenBLAS follows --threads",
              {{"openblas_threads_before", before}, {"openblas_threads", after}});
  }
  return after;
}

}  // namespace fulcrum::trainer
