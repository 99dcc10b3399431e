// SetCpuMathThreads: OpenBLAS's pool follows the trainer's --threads, as torch's does (Debian's
// libtorch does its matrix products in OpenBLAS, which torch::set_num_threads leaves alone).
#include "trainer_image/trainer/device/cpu_threads.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace fulcrum::trainer {
namespace {

TEST(CpuThreads, OpenBlasUsesAsManyThreadsAsTheTrainerIsGiven) {
  auto* openblas_threads =
      reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (openblas_threads == nullptr) GTEST_SKIP() << "this libtorch does not use OpenBLAS";
  torch::set_num_threads(1);  // what the trainer did alone: OpenBLAS keeps its own pool
  const int machine_default = openblas_threads();
  EXPECT_EQ(SetCpuMathThreads(1, "test"), 1);
  EXPECT_EQ(openblas_threads(), 1) << "was " << machine_default;
  EXPECT_EQ(torch::get_num_threads(), 1);
  if (machine_default >= 2) {
    EXPECT_EQ(SetCpuMathThreads(2, "test"), 2);
    EXPECT_EQ(openblas_threads(), 2);
  }
}

}  // namespace
}  // namespace fulcrum::trainer
