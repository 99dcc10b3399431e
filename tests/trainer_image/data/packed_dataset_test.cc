// A packed dataset is mapped and checked before the first step: samples come back as written,
// across shards, and each kind of bad dataset is refused naming the file and the field.
#include "trainer_image/trainer/data/packed_dataset.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "tests/support/temporary_directory.h"
#include "tests/trainer_image/data/packed_dataset_writer.h"

namespace fulcrum::trainer {
namespace {

using testing::BytesOf;
using testing::TemporaryDirectory;
using testing::TestField;
using testing::WritePackedDataset;

// n images of 2x2x2 uint8 whose bytes are (sample * 8 + i) % 256, labels sample % classes.
std::vector<TestField> Images(int64_t n, int64_t classes, int64_t first = 0) {
  std::vector<uint8_t> pixels(static_cast<std::size_t>(n * 8));
  for (std::size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<uint8_t>((static_cast<int64_t>(i) + first * 8) % 256);
  std::vector<int64_t> labels(static_cast<std::size_t>(n));
  for (int64_t s = 0; s < n; ++s) labels[static_cast<std::size_t>(s)] = (s + first) % classes;
  std::vector<TestField> fields(2);
  fields[0].name = "image", fields[0].dtype = "uint8", fields[0].shape = {2, 2, 2};
  fields[0].data = BytesOf(pixels);
  fields[1].name = "label", fields[1].dtype = "int64", fields[1].data = BytesOf(labels);
  fields[1].classes = classes;
  return fields;
}

std::vector<uint8_t> GatherImages(const PackedDataset& dataset, std::vector<int64_t> indices) {
  std::vector<uint8_t> out(indices.size() * 8);
  dataset.Gather(0, indices, std::as_writable_bytes(std::span(out)));
  return out;
}

TEST(PackedDataset, GivesBackTheSamplesAsWritten) {
  TemporaryDirectory directory("packed");
  WritePackedDataset(directory.path().string(), 5, Images(5, 3));
  const Result<PackedDataset> dataset = PackedDataset::Open(directory.path().string());
  ASSERT_TRUE(dataset.ok()) << dataset.error().ToString();
  EXPECT_EQ(dataset->size(), 5);
  ASSERT_EQ(dataset->fields().size(), 2u);
  EXPECT_EQ(*dataset->FieldIndex("label"), 1u);
  const std::vector<uint8_t> images = GatherImages(*dataset, {4, 0});
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(images[static_cast<std::size_t>(i)], 32 + i);
    EXPECT_EQ(images[static_cast<std::size_t>(8 + i)], i);
  }
  std::vector<int64_t> labels(2);
  dataset->Gather(1, std::vector<int64_t>{4, 2}, std::as_writable_bytes(std::span(labels)));
  EXPECT_EQ(labels, (std::vector<int64_t>{1, 2}));
  EXPECT_FALSE(dataset->FieldIndex("mask").ok());
}

TEST(PackedDataset, ConcatenatesShardsInTheirListedOrder) {
  TemporaryDirectory directory("sharded");
  const std::string root = directory.path().string();
  WritePackedDataset(root + "/part-b", 2, Images(2, 3, 3));
  WritePackedDataset(root + "/part-a", 3, Images(3, 3, 0));
  std::ofstream(root + "/dataset.json")
      << R"({"format": "fulcrum.dataset", "version": 1, "shards": ["part-a", "part-b"]})";
  const Result<PackedDataset> dataset = PackedDataset::Open(root);
  ASSERT_TRUE(dataset.ok()) << dataset.error().ToString();
  EXPECT_EQ(dataset->size(), 5);
  const std::vector<uint8_t> images = GatherImages(*dataset, {0, 2, 3, 4});
  for (std::size_t s = 0; s < 4; ++s) {
    const int sample = std::vector<int>{0, 2, 3, 4}[s];
    EXPECT_EQ(images[s * 8], sample * 8) << "sample " << sample;
  }
}

// Opening fails, the error naming `file` (a path suffix) and containing `words`.
void ExpectRefused(const std::string& directory, const std::string& file,
                   const std::string& words) {
  const Result<PackedDataset> dataset = PackedDataset::Open(directory);
  ASSERT_FALSE(dataset.ok()) << "opened " << directory;
  const std::string text = dataset.error().ToString();
  EXPECT_NE(dataset.error().field.find(file), std::string::npos) << text;
  EXPECT_NE(text.find(words), std::string::npos) << text;
}

TEST(PackedDataset, RefusesAMissingDatasetJson) {
  TemporaryDirectory directory("missing");
  ExpectRefused(directory.path().string(), "dataset.json", "fulcrum-pack");
}

TEST(PackedDataset, RefusesAFieldWhoseNpyHasAnotherDtypeOrShape) {
  TemporaryDirectory directory("mismatch");
  const std::string root = directory.path().string();
  std::vector<TestField> fields = Images(4, 3);
  fields[0].npy_dtype = "int8";
  WritePackedDataset(root, 4, fields);
  ExpectRefused(root, "image.npy", "field image");
  ExpectRefused(root, "image.npy", "holds '|i1' but dataset.json says uint8");

  fields = Images(4, 3);
  fields[0].shape = {2, 4};
  fields[0].npy_shape = {8};
  WritePackedDataset(root, 4, fields);
  ExpectRefused(root, "image.npy", "has shape [4, 8] but dataset.json says [4, 2, 4]");
}

TEST(PackedDataset, RefusesATruncatedNpy) {
  TemporaryDirectory directory("truncated");
  const std::string root = directory.path().string();
  WritePackedDataset(root, 4, Images(4, 3));
  std::filesystem::resize_file(root + "/image.npy",
                               std::filesystem::file_size(root + "/image.npy") - 3);
  ExpectRefused(root, "image.npy", "truncated");
}

TEST(PackedDataset, RefusesALabelOutOfRangeNamingTheSample) {
  TemporaryDirectory directory("label");
  const std::string root = directory.path().string();
  std::vector<TestField> fields = Images(4, 3);
  std::vector<int64_t> labels = {0, 1, 7, 2};
  fields[1].data = BytesOf(labels);
  WritePackedDataset(root, 4, fields);
  ExpectRefused(root, "label.npy", "sample 2 holds 7, outside [0, 3)");
}

TEST(PackedDataset, RefusesShardsWithDifferentFields) {
  TemporaryDirectory directory("shards");
  const std::string root = directory.path().string();
  WritePackedDataset(root + "/a", 2, Images(2, 3));
  WritePackedDataset(root + "/b", 2, Images(2, 4));  // another class count
  std::ofstream(root + "/dataset.json")
      << R"({"format": "fulcrum.dataset", "version": 1, "shards": ["a", "b"]})";
  ExpectRefused(root, "b/dataset.json", "same names, dtypes, shapes and classes");
}

}  // namespace
}  // namespace fulcrum::trainer
