// fulcrum-trainer: heterogeneous data-parallel training with in-place rebalancing.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>

#include "trainer_image/trainer/loop/training_loop.h"
#include "trainer_image/trainer/trainer_flags.h"

namespace {

std::atomic<int> stop_signal{0};  // set by SIGTERM/SIGINT; the loop checks it between steps

extern "C" void OnStopSignal(int signal_number) {
  stop_signal.store(signal_number);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::map<std::string, std::string> environment;
  for (const char* name : {"FULCRUM_SLOWDOWN_FILE", "FULCRUM_IMAGE"}) {
    if (const char* value = std::getenv(name)) environment[name] = value;
  }
  auto config = fulcrum::trainer::ParseTrainerFlags(args, environment);
  if (!config.ok() && config.error().field == "--help") {
    std::cout << config.error().message;
    return 0;
  }
  if (!config.ok()) {
    std::cerr << "fulcrum-trainer: error: " << config.error().field << ": "
              << config.error().message << "\n";
    return 2;
  }
  std::signal(SIGTERM, OnStopSignal);
  std::signal(SIGINT, OnStopSignal);
  // A write to a socket whose peer shut it down must fail that write (EPIPE), not kill the
  // process. Gloo's TCP pairs write with plain writev (no MSG_NOSIGNAL; PyTorch's usual host,
  // Python, ignores SIGPIPE), so without this a trainer that hung, was abandoned and resumes
  // mid-all-reduce answers a peer's buffered request on a socket that peer's Abort shut down,
  // and dies of SIGPIPE without a line of log instead of failing the step and rejoining.
  std::signal(SIGPIPE, SIG_IGN);
  return fulcrum::trainer::RunTrainer(*config, stop_signal);
}
