// The model contract (docs/user-guide.md) at its edges, with real fulcrum-trainer processes and
// modules scripted by Debian's python3-torch (model/make_contract_models.py):
// - a module that breaks the contract is refused before step 1 with exit code 2 (the operator
//   fails the job instead of restarting it) and an error that names what to fix;
// - the trained model.pt loads in Python with the user's own state_dict names, and the checkpoint
//   helper (python/fulcrum/checkpoint.py) reads the same tensors;
// - --init-from starts a job from another's model.pt, and refuses one whose shapes differ;
// - a checkpoint in the format before names is refused, saying how to go on.
#include <gtest/gtest.h>

#include "tests/support/subprocess.h"
#include "tests/trainer_image/harness/contract_models.h"
#include "tests/trainer_image/harness/local_job.h"

namespace fulcrum::testing {
namespace {

std::string TrainerCommand(const std::string& module, const std::string& extra) {
  return ShellQuote(TrainerBinary()) +
         " --world-size 1 --rank 0 --rendezvous 127.0.0.1:" + std::to_string(FreeLoopbackPort()) +
         " --batches 16 --steps 20 --model torchscript" + " --torchscript " +
         ShellQuote(ContractModels() + "/" + module) + " --dataset " +
         ShellQuote(ContractModels() + "/data") + " " + extra;
}

// Runs one trainer that must be refused at start; returns its error line.
std::string RefusedError(const std::string& module, const std::string& extra = "") {
  const CommandResult run = RunShell(TrainerCommand(module, extra) + " 2>&1");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  const std::size_t at = run.output.find("\"msg\":\"cannot start\"");
  EXPECT_NE(at, std::string::npos) << run.output;
  return run.output;
}

TEST(ModelContract, ALossMethodThatReturnsTheMeanIsRefusedWithTheReason) {
  ASSERT_FALSE(ContractModels().empty());
  const std::string output = RefusedError("mean_loss.pt");
  EXPECT_NE(output.find("returns the mean over the batch"), std::string::npos) << output;
  EXPECT_NE(output.find("reduction='sum'"), std::string::npos) << output;
}

TEST(ModelContract, ALossMethodThatReturnsOneLossPerSampleIsRefused) {
  ASSERT_FALSE(ContractModels().empty());
  const std::string output = RefusedError("vector_loss.pt");
  EXPECT_NE(output.find("not one number"), std::string::npos) << output;
  EXPECT_EQ(output.find("Exception raised from"), std::string::npos) << output;  // no backtrace
}

TEST(ModelContract, AForwardThatAsksForAFieldTheDatasetLacksIsRefusedNamingIt) {
  ASSERT_FALSE(ContractModels().empty());
  const std::string output = RefusedError("missing_field.pt");
  EXPECT_NE(output.find("forward asks for \\\"segments\\\""), std::string::npos) << output;
  EXPECT_NE(output.find("its fields: tokens, mask, label"), std::string::npos) << output;
}

TEST(ModelContract, Float16ParametersAreRefusedNamingTheParameter) {
  ASSERT_FALSE(ContractModels().empty());
  const std::string output = RefusedError("half.pt");
  EXPECT_NE(output.find("parameter embed.weight is Half"), std::string::npos) << output;
  EXPECT_NE(output.find("module.float()"), std::string::npos) << output;
}

TEST(ModelContract, TheTrainedModelLoadsInPythonAndTheCheckpointHelperReadsTheSameTensors) {
  ASSERT_FALSE(ContractModels().empty());
  const std::string directory = FreshDirectory("contract-output");
  const CommandResult run = RunShell(
      TrainerCommand("two_inputs.pt", "--checkpoint-dir " + ShellQuote(directory + "/checkpoints") +
                                          " --output-dir " + ShellQuote(directory + "/output")) +
      " 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json metadata = nlohmann::json::parse(ReadFile(directory + "/output/model.json"));
  EXPECT_EQ(metadata["step"], 20);
  EXPECT_EQ(metadata["recipe"]["optimizer"], "sgd");
  EXPECT_TRUE(metadata["model"]["custom_loss"].get<bool>());
  EXPECT_EQ(metadata["dataset"]["fingerprint"].get<std::string>().substr(0, 8), "fnv1a64:");
  // In Python: model.pt's state_dict has the user's names and equals the final checkpoint read
  // by the helper, tensor for tensor; the module still runs forward and its loss method.
  const std::string script = R"(
import sys, torch
sys.path.insert(0, sys.argv[1] + "/python")
from fulcrum.checkpoint import load_checkpoint
model = torch.jit.load(sys.argv[2] + "/output/model.pt")
state = model.state_dict()
assert list(state) == ["embed.weight", "hidden.weight", "hidden.bias", "out.weight", "out.bias"], list(state)
checkpoint = load_checkpoint(sys.argv[2] + "/checkpoints/checkpoint-000000000020.bin")
assert checkpoint.step == 20 and checkpoint.cursor == 320, (checkpoint.step, checkpoint.cursor)
assert set(checkpoint.state_dict) == set(state), set(checkpoint.state_dict)
for name, tensor in state.items():
    assert torch.equal(tensor, checkpoint.state_dict[name]), name
assert set(checkpoint.optimizer["momentum_buffer"]) == {"hidden.weight", "hidden.bias", "out.weight", "out.bias"}
tokens = torch.zeros(2, 6, dtype=torch.int64)
mask = torch.ones(2, 6)
outputs = model(tokens, mask)
loss = model.loss(outputs, {"label": torch.tensor([0, 1])})
assert outputs.shape == (2, 3) and loss.dim() == 0
print("python-ok")
)";
  WriteFile(directory + "/check.py", script);
  const CommandResult python =
      RunShell("/usr/bin/python3 " + ShellQuote(directory + "/check.py") + " " +
               ShellQuote(FULCRUM_SOURCE_DIR) + " " + ShellQuote(directory) + " 2>&1");
  EXPECT_EQ(python.exit_code, 0) << python.output;
  EXPECT_NE(python.output.find("python-ok"), std::string::npos) << python.output;
}

// Three ranks with unequal batches {3, 5, 8} evaluate shards of 50 held-out samples sized
// 9, 16, 25 (their shares of the batch); the all-reduced sums equal what one Python process
// computes with the written model.pt on the whole set.
TEST(ModelContract, ShardedEvaluationEqualsOneProcessOnTheWholeSet) {
  ASSERT_FALSE(ContractModels().empty());
  const std::string directory = FreshDirectory("contract-evaluation");
  const int port = FreeLoopbackPort();
  std::vector<ChildProcess> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    ranks.emplace_back(std::vector<std::string>{TrainerBinary(),
                                                "--world-size",
                                                "3",
                                                "--rank",
                                                std::to_string(rank),
                                                "--rendezvous",
                                                "127.0.0.1:" + std::to_string(port),
                                                "--batches",
                                                "3,5,8",
                                                "--steps",
                                                "20",
                                                "--model",
                                                "torchscript",
                                                "--torchscript",
                                                ContractModels() + "/two_inputs.pt",
                                                "--dataset",
                                                ContractModels() + "/data",
                                                "--lr",
                                                "0.1",
                                                "--eval-dataset",
                                                ContractModels() + "/heldout",
                                                "--eval-every",
                                                "10",
                                                "--eval-batch-size",
                                                "7",
                                                "--output-dir",
                                                directory + "/output"},
                       directory + "/rank" + std::to_string(rank) + ".log");
  }
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_EQ(ranks[static_cast<std::size_t>(rank)].Wait(std::chrono::seconds(120)), 0)
        << ReadFile(directory + "/rank" + std::to_string(rank) + ".log");
  }
  std::vector<std::vector<int64_t>> shards;
  for (int rank = 0; rank < 3; ++rank) {
    const auto evaluated =
        ReadJsonLines(directory + "/rank" + std::to_string(rank) + ".log", "evaluated");
    ASSERT_EQ(evaluated.size(), 2u);  // at step 10 and the final one at step 20
    EXPECT_EQ(evaluated[0]["step"], 10);
    EXPECT_EQ(evaluated[1]["step"], 20);
    shards.push_back(evaluated[1]["shard"].get<std::vector<int64_t>>());
  }
  EXPECT_EQ(shards, (std::vector<std::vector<int64_t>>{{0, 9}, {9, 25}, {25, 50}}));
  const nlohmann::json metadata = nlohmann::json::parse(ReadFile(directory + "/output/model.json"));
  const nlohmann::json& evaluation = metadata["last_evaluation"];
  ASSERT_EQ(evaluation["step"], 20) << metadata;
  EXPECT_EQ(evaluation["samples"], 50);
  const std::string script = R"(
import json, sys
import numpy as np, torch
data, model_path, loss, accuracy = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
model = torch.jit.load(model_path)
model.eval()
fields = {name: torch.from_numpy(np.load(f"{data}/{name}.npy")) for name in ["tokens", "mask", "label"]}
with torch.no_grad():
    outputs = model(fields["tokens"], fields["mask"])
    total = model.loss(outputs, fields).item()
    correct = (outputs.argmax(1) == fields["label"]).sum().item()
n = len(fields["label"])
print("python", total / n, correct / n)
assert abs(total / n - loss) <= 1e-5 * max(1.0, abs(loss)), (total / n, loss)
assert correct / n == accuracy, (correct / n, accuracy)
)";
  WriteFile(directory + "/check.py", script);
  const CommandResult python = RunShell(
      "/usr/bin/python3 " + ShellQuote(directory + "/check.py") + " " +
      ShellQuote(ContractModels() + "/heldout") + " " + ShellQuote(directory + "/output/model.pt") +
      " " + evaluation["loss"].dump() + " " + evaluation["accuracy"].dump() + " 2>&1");
  EXPECT_EQ(python.exit_code, 0) << python.output;
}

TEST(ModelContract, AnEvaluationSetWithOtherFieldsIsRefusedNamingBoth) {
  ASSERT_FALSE(ContractModels().empty());
  const std::string output =
      RefusedError("two_inputs.pt", "--eval-dataset " + ShellQuote(ContractModels() + "/no_mask"));
  EXPECT_NE(output.find("--eval-dataset"), std::string::npos) << output;
  EXPECT_NE(output.find("has the fields tokens, label, the training dataset tokens, mask, label"),
            std::string::npos)
      << output;
}

TEST(ModelContract, InitFromStartsFromAnotherJobsModelAndRefusesOtherShapes) {
  ASSERT_FALSE(ContractModels().empty());
  const std::string directory = FreshDirectory("contract-init-from");
  const CommandResult first =
      RunShell(TrainerCommand("two_inputs.pt", "--output-dir " + ShellQuote(directory + "/first")) +
               " 2>&1");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const nlohmann::json metadata = nlohmann::json::parse(ReadFile(directory + "/first/model.json"));
  const std::string log = directory + "/second.log";
  const CommandResult second = RunShell(
      TrainerCommand("two_inputs.pt", "--init-from " + ShellQuote(directory + "/first/model.pt")) +
      " > " + ShellQuote(log) + " 2>&1");
  ASSERT_EQ(second.exit_code, 0) << ReadFile(log);
  const auto initialised = ReadJsonLines(log, "initialised from weights");
  ASSERT_EQ(initialised.size(), 1u) << ReadFile(log);
  EXPECT_EQ(initialised.front()["checksum"], metadata["checksum"]);

  const std::string output =
      RefusedError("wider.pt", "--init-from " + ShellQuote(directory + "/first/model.pt"));
  EXPECT_NE(output.find("--init-from"), std::string::npos) << output;
  EXPECT_NE(output.find("hidden.weight is float32 [16, 8] there but float32 [24, 8]"),
            std::string::npos)
      << output;
}

TEST(ModelContract, ACheckpointOfTheFormatBeforeNamesIsRefusedSayingHowToGoOn) {
  ASSERT_FALSE(ContractModels().empty());
  const std::string directory = FreshDirectory("contract-old-checkpoint");
  std::string old(64, '\0');
  old.replace(0, 15, "FULCRUM-CKPT-1\n");
  WriteFile(directory + "/checkpoint-000000000005.bin", old);
  const std::string output = RefusedError("two_inputs.pt", "--checkpoint-dir " + directory);
  EXPECT_NE(output.find("format 1"), std::string::npos) << output;
  EXPECT_NE(output.find("move the checkpoint files away"), std::string::npos) << output;
}

}  // namespace
}  // namespace fulcrum::testing
