// dataset.json: the format of docs/dataset-format.md is read, and every mistake is refused with
// the key named.
#include "trainer_image/trainer/data/dataset_spec.h"

#include <gtest/gtest.h>

namespace fulcrum::trainer {
namespace {

constexpr const char* kCifar = R"({
  "format": "fulcrum.dataset", "version": 1, "samples": 50000,
  "fields": [
    {"name": "image", "dtype": "uint8", "shape": [3, 32, 32]},
    {"name": "label", "dtype": "int64", "shape": [], "file": "labels.npy", "classes": 10}
  ],
  "meta": {"class_names": ["airplane"]}
})";

TEST(DatasetSpec, ReadsFieldsWithTheirTypesShapesFilesAndClasses) {
  const Result<DatasetSpec> spec = ParseDatasetSpec(kCifar, "cifar/dataset.json");
  ASSERT_TRUE(spec.ok()) << spec.error().ToString();
  EXPECT_EQ(spec->samples, 50000);
  ASSERT_EQ(spec->fields.size(), 2u);
  EXPECT_EQ(spec->fields[0].type, ElementType::kUint8);
  EXPECT_EQ(spec->fields[0].file, "image.npy");
  EXPECT_EQ(spec->fields[0].BytesPerSample(), 3u * 32 * 32);
  EXPECT_FALSE(spec->fields[0].classes.has_value());
  EXPECT_EQ(spec->fields[1].file, "labels.npy");
  EXPECT_EQ(spec->fields[1].shape, std::vector<int64_t>{});
  EXPECT_EQ(spec->fields[1].BytesPerSample(), 8u);
  EXPECT_EQ(spec->fields[1].classes, 10);
}

TEST(DatasetSpec, ReadsAListOfShards) {
  const Result<DatasetSpec> spec = ParseDatasetSpec(
      R"({"format": "fulcrum.dataset", "version": 1, "shards": ["a", "b"]})", "d.json");
  ASSERT_TRUE(spec.ok()) << spec.error().ToString();
  EXPECT_EQ(spec->shards, (std::vector<std::string>{"a", "b"}));
}

// Each bad document and the key its error must name.
TEST(DatasetSpec, NamesTheKeyThatIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "d.json"},
      {R"({"format": "npz", "version": 1, "samples": 1, "fields": []})", "d.json: format"},
      {R"({"format": "fulcrum.dataset", "version": 2})", "d.json: version"},
      {R"({"format": "fulcrum.dataset", "version": 1, "fields": []})", "d.json: samples"},
      {R"({"format": "fulcrum.dataset", "version": 1, "samples": 0})", "d.json: samples"},
      {R"({"format": "fulcrum.dataset", "version": 1, "samples": 1, "fields": []})",
       "d.json: fields"},
      {R"({"format": "fulcrum.dataset", "version": 1, "samples": 1, "sample": 1, "fields": []})",
       "d.json: sample"},
      {R"({"format": "fulcrum.dataset", "version": 1, "samples": 1,
           "fields": [{"name": "x", "dtype": "float64", "shape": [1]}]})",
       "d.json: fields[0] (x).dtype"},
      {R"({"format": "fulcrum.dataset", "version": 1, "samples": 1,
           "fields": [{"name": "x", "dtype": "float32", "shape": [0]}]})",
       "d.json: fields[0] (x).shape[]"},
      {R"({"format": "fulcrum.dataset", "version": 1, "samples": 1,
           "fields": [{"name": "x", "dtype": "float32"}]})",
       "d.json: fields[0] (x).shape"},
      {R"({"format": "fulcrum.dataset", "version": 1, "samples": 1,
           "fields": [{"name": "x", "dtype": "float32", "shape": [], "classes": 3}]})",
       "d.json: fields[0] (x).classes"},
      {R"({"format": "fulcrum.dataset", "version": 1, "samples": 1,
           "fields": [{"name": "x", "dtype": "uint8", "shape": [], "file": "../x.npy"}]})",
       "d.json: fields[0] (x).file"},
      {R"({"format": "fulcrum.dataset", "version": 1, "samples": 1,
           "fields": [{"name": "1x", "dtype": "uint8", "shape": []}]})",
       "d.json: fields[0].name"},
      {R"({"format": "fulcrum.dataset", "version": 1, "samples": 1,
           "fields": [{"name": "x", "dtype": "uint8", "shape": []},
                      {"name": "x", "dtype": "uint8", "shape": [], "file": "y.npy"}]})",
       "d.json: fields"},
      {R"({"format": "fulcrum.dataset", "version": 1, "shards": ["a", "../b"]})",
       "d.json: shards[]"},
      {R"({"format": "fulcrum.dataset", "version": 1, "shards": []})", "d.json: shards"},
  };
  for (const auto& [text, field] : cases) {
    const Result<DatasetSpec> spec = ParseDatasetSpec(text, "d.json");
    ASSERT_FALSE(spec.ok()) << text;
    EXPECT_EQ(spec.error().field, field) << text << "\n" << spec.error().ToString();
  }
}

}  // namespace
}  // namespace fulcrum::trainer
