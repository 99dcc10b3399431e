// How many CPU threads a step's math may use, for every library that does that math. torch's
// own setting (torch::set_num_threads) covers OpenMP and MKL, but Debian's libtorch multiplies
// matrices with OpenBLAS's pthreads build, whose pool is sized to the machine's cores unless
// OPENBLAS_NUM_THREADS or OMP_NUM_THREADS was set before it loaded. Its caller then waits for
// the pool's threads in a sched_yield loop, which under contention burns CPU on the training
// thread: with --threads 1 on two shared cores, a worker at batch 1 spent 40-110 ms of CPU in
// that loop per step against 4 ms of work, and an emulated slowdown, which multiplies the
// compute's CPU time, made batch 1 look slower than batch 13 (perf: 55% of the thread's samples
// in sched_yield).
#pragma once

#include <string>

namespace fulcrum::trainer {

// Sets torch's intra-op threads and, when OpenBLAS is loaded, OpenBLAS's to `threads` (>= 1).
// Returns OpenBLAS's thread count afterwards, or 0 when this process has no OpenBLAS (CUDA
// images, MKL builds: torch's setting is then the whole story).
int SetCpuMathThreads(int threads, const std::string& job);

}  // namespace fulcrum::trainer
