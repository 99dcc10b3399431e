// Datasets written by fulcrum-pack (python/) -- from a torch Dataset, NumPy arrays of several
// dtypes, an image folder, and in shards -- come back through the trainer's reader byte for
// byte as NumPy reads them.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/polling.h"
#include "tests/support/subprocess.h"
#include "tests/support/temporary_directory.h"
#include "trainer_image/trainer/data/packed_dataset.h"

namespace fulcrum::trainer {
namespace {

class FulcrumPackRoundTrip : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    directory_ = new testing::TemporaryDirectory("fulcrum-pack");
    const std::string root = FULCRUM_SOURCE_DIR;
    const testing::CommandResult written = testing::RunShell(
        "PYTHONPATH=" + testing::ShellQuote(root + "/python") + " /usr/bin/python3 " +
        testing::ShellQuote(root + "/tests/trainer_image/data/write_with_fulcrum_pack.py") + " " +
        testing::ShellQuote(directory_->path().string()));
    ASSERT_EQ(written.exit_code, 0) << written.output;
  }
  static void TearDownTestSuite() { delete directory_; }

  // Every field of `name` gathered over all samples equals NumPy's bytes of it.
  static void ExpectSameAsNumPy(const std::string& name, std::size_t fields) {
    const std::string directory = (directory_->path() / name).string();
    const Result<PackedDataset> dataset = PackedDataset::Open(directory);
    ASSERT_TRUE(dataset.ok()) << dataset.error().ToString();
    ASSERT_EQ(dataset->fields().size(), fields);
    std::vector<int64_t> all(static_cast<std::size_t>(dataset->size()));
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    for (std::size_t field = 0; field < fields; ++field) {
      const FieldSpec& spec = dataset->fields()[field];
      std::string gathered(all.size() * spec.BytesPerSample(), '\0');
      dataset->Gather(field, all, std::as_writable_bytes(std::span(gathered)));
      const std::string expected = testing::ReadFile(directory + "/" + spec.name + ".expected");
      EXPECT_EQ(gathered.size(), expected.size()) << name << "/" << spec.name;
      EXPECT_TRUE(gathered == expected) << name << "/" << spec.name << " differs from NumPy";
    }
  }

  static testing::TemporaryDirectory* directory_;
};

testing::TemporaryDirectory* FulcrumPackRoundTrip::directory_ = nullptr;

TEST_F(FulcrumPackRoundTrip, ATorchDatasetOfTuples) {
  ExpectSameAsNumPy("torch", 2);
  const Result<PackedDataset> dataset =
      PackedDataset::Open((directory_->path() / "torch").string());
  ASSERT_TRUE(dataset.ok());
  EXPECT_EQ(dataset->size(), 37);
  EXPECT_EQ(dataset->fields()[0].type, ElementType::kUint8);
  EXPECT_EQ(dataset->fields()[0].shape, (std::vector<int64_t>{3, 5, 4}));
  EXPECT_EQ(dataset->fields()[1].classes, 4);
}

TEST_F(FulcrumPackRoundTrip, NumPyArraysOfEveryKind) {
  ExpectSameAsNumPy("arrays", 5);
}

TEST_F(FulcrumPackRoundTrip, AnImageFolder) {
  ExpectSameAsNumPy("images", 2);
  const Result<PackedDataset> dataset =
      PackedDataset::Open((directory_->path() / "images").string());
  ASSERT_TRUE(dataset.ok());
  EXPECT_EQ(dataset->fields()[0].shape, (std::vector<int64_t>{3, 8, 8}));
  EXPECT_EQ(dataset->fields()[1].classes, 3);
}

TEST_F(FulcrumPackRoundTrip, Shards) {
  ExpectSameAsNumPy("sharded", 2);
}

}  // namespace
}  // namespace fulcrum::trainer
