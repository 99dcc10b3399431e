// The user-model path: a TorchScript module (torch::jit::load) on a file of fixed-size
// records, trained by 2 ranks with unequal batches; ranks end identical and the loss falls.
#include <gtest/gtest.h>

#include "tests/support/subprocess.h"
#include "tests/trainer_image/harness/local_job.h"

namespace fulcrum::testing {
namespace {

TEST(TrainerTorchScript, TrainsAUserModuleOnARecordFile) {
  const std::string directory = FreshDirectory("torchscript");
  const CommandResult made = RunShell(ShellQuote(FULCRUM_MAKE_EXAMPLE_BINARY) + " " +
                                      ShellQuote(directory + "/module.pt") + " " +
                                      ShellQuote(directory + "/records.bin") + " 16 4 512");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const int port = FreeLoopbackPort();
  std::vector<ChildProcess> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back(std::vector<std::string>{TrainerBinary(),
                                                "--world-size",
                                                "2",
                                                "--rank",
                                                std::to_string(rank),
                                                "--rendezvous",
                                                "127.0.0.1:" + std::to_string(port),
                                                "--batches",
                                                "5,11",
                                                "--model",
                                                "torchscript",
                                                "--torchscript",
                                                directory + "/module.pt",
                                                "--data-file",
                                                directory + "/records.bin",
                                                "--record-features",
                                                "16",
                                                "--steps",
                                                "60",
                                                "--lr",
                                                "0.1",
                                                "--collective-timeout-ms",
                                                "20000"},
                       directory + "/rank" + std::to_string(rank) + ".log");
  }
  std::set<std::string> checksums;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = directory + "/rank" + std::to_string(rank) + ".log";
    ASSERT_EQ(ranks[static_cast<std::size_t>(rank)].Wait(std::chrono::seconds(120)), 0)
        << ReadFile(log);
    const auto finished = ReadJsonLines(log, "finished");
    ASSERT_EQ(finished.size(), 1u);
    checksums.insert(finished.front()["checksum"].get<std::string>());
    const auto steps = ReadJsonLines(log, "step");
    ASSERT_GE(steps.size(), 2u);
    EXPECT_LT(finished.front()["loss"].get<double>(), steps.front()["loss"].get<double>());
  }
  EXPECT_EQ(checksums.size(), 1u);
}

TEST(TrainerTorchScript, ARecordFileOfTheWrongSizeIsRefusedNamingTheFlag) {
  const std::string directory = FreshDirectory("torchscript-bad");
  WriteFile(directory + "/records.bin", "abc");
  const CommandResult run =
      RunShell(ShellQuote(TrainerBinary()) +
               " --world-size 1 --rank 0 --rendezvous 127.0.0.1:1 --batches 4" +
               " --model torchscript --torchscript /nonexistent.pt --data-file " +
               ShellQuote(directory + "/records.bin") + " --record-features 16 2>&1");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("--data-file"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace fulcrum::testing
