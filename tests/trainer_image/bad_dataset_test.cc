// fulcrum-trainer refuses a bad packed dataset before its first step, exit code 2 (invalid input)
// and one error line naming the file and the field; and a dataset smaller than one global batch
// stops it with a message saying so, instead of training samples twice in a step.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/trainer_image/data/packed_dataset_writer.h"
#include "tests/trainer_image/harness/local_job.h"

namespace fulcrum::testing {
namespace {

std::vector<TestField> Images(int64_t samples, std::vector<int64_t> labels) {
  std::vector<uint8_t> pixels(static_cast<std::size_t>(samples * 12), 7);
  std::vector<TestField> fields(2);
  fields[0].name = "image", fields[0].dtype = "uint8", fields[0].shape = {3, 2, 2};
  fields[0].data = BytesOf(pixels);
  fields[1].name = "label", fields[1].dtype = "int64", fields[1].data = BytesOf(labels);
  fields[1].classes = 3;
  return fields;
}

// Runs one trainer (a static group of one, batch `batch`) on `dataset`; its exit code and log.
std::pair<int, std::string> Train(const std::string& dataset, const std::string& batch) {
  const std::string log = dataset + ".log";
  std::filesystem::remove(log);  // beside the dataset, so not cleared by FreshDirectory
  ChildProcess trainer({TrainerBinary(), "--world-size", "1", "--rank", "0", "--rendezvous",
                        "127.0.0.1:" + std::to_string(FreeLoopbackPort()), "--batches", batch,
                        "--steps", "3", "--dataset", dataset},
                       log);
  const std::optional<int> code = trainer.Wait(std::chrono::seconds(60));
  return {code.value_or(-1), ReadFile(log)};
}

// The trainer exits 2, and its "cannot start" line names `file` and contains `words`.
void ExpectRefused(const std::string& dataset, const std::string& file, const std::string& words) {
  const auto [code, log] = Train(dataset, "4");
  EXPECT_EQ(code, 2) << log;
  const auto refusals = ReadJsonLines(dataset + ".log", "cannot start");
  ASSERT_EQ(refusals.size(), 1u) << log;
  const std::string error = refusals[0]["error"];
  EXPECT_NE(error.find(file), std::string::npos) << error;
  EXPECT_NE(error.find(words), std::string::npos) << error;
}

TEST(TrainerBadDataset, AMissingDatasetJsonIsRefusedNamingIt) {
  const std::string directory = FreshDirectory("bad-dataset-missing");
  ExpectRefused(directory, directory + "/dataset.json", "fulcrum-pack");
}

TEST(TrainerBadDataset, AFieldWhoseNpyHasAnotherDtypeIsRefusedNamingFileAndField) {
  const std::string directory = FreshDirectory("bad-dataset-dtype");
  std::vector<TestField> fields = Images(8, {0, 1, 2, 0, 1, 2, 0, 1});
  fields[1].npy_dtype = "int32";
  fields[1].data.resize(8 * 4);
  WritePackedDataset(directory, 8, fields);
  ExpectRefused(directory, directory + "/label.npy", "field label");
}

TEST(TrainerBadDataset, ATruncatedNpyIsRefusedNamingIt) {
  const std::string directory = FreshDirectory("bad-dataset-truncated");
  WritePackedDataset(directory, 8, Images(8, {0, 1, 2, 0, 1, 2, 0, 1}));
  std::filesystem::resize_file(directory + "/image.npy",
                               std::filesystem::file_size(directory + "/image.npy") - 12);
  ExpectRefused(directory, directory + "/image.npy", "truncated");
}

TEST(TrainerBadDataset, ALabelOutOfRangeIsRefusedNamingTheSample) {
  const std::string directory = FreshDirectory("bad-dataset-label");
  WritePackedDataset(directory, 8, Images(8, {0, 1, 2, 0, 9, 2, 0, 1}));
  ExpectRefused(directory, directory + "/label.npy", "sample 4 holds 9, outside [0, 3)");
}

TEST(TrainerBadDataset, ADatasetSmallerThanOneGlobalBatchStopsTheTrainerSayingSo) {
  const std::string directory = FreshDirectory("bad-dataset-small");
  WritePackedDataset(directory, 8, Images(8, {0, 1, 2, 0, 1, 2, 0, 1}));
  const auto [code, log] = Train(directory, "16");
  EXPECT_EQ(code, 2) << log;
  EXPECT_NE(log.find("the dataset has 8 samples, fewer than one global batch of 16"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("\"msg\":\"step\""), std::string::npos) << "it trained a step: " << log;
}

}  // namespace
}  // namespace fulcrum::testing
