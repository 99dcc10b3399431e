// The prefetching loader: a batch taken is the batch of its range, whether it was prefetched,
// still loading, or never asked for; a change of plan drops loads no one will take; a load's
// error reaches the step that takes it.
#include "trainer_image/trainer/data/batch_loader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

namespace fulcrum::trainer {
namespace {

// Sample i is the vector [i, i] with label i % 3; index 13 cannot be read.
class CountingDataset final : public Dataset {
 public:
  int64_t size() const override { return 100; }
  const std::vector<DataField>& fields() const override { return fields_; }
  Batch Get(std::span<const int64_t> indices) override {
    ++reads;
    std::vector<float> values;
    std::vector<int64_t> labels;
    for (int64_t index : indices) {
      if (index == 13) throw std::runtime_error("sample 13 cannot be read");
      values.insert(values.end(), {static_cast<float>(index), static_cast<float>(index)});
      labels.push_back(index % 3);
    }
    const auto count = static_cast<int64_t>(indices.size());
    return {{torch::tensor(values).view({count, 2}), torch::tensor(labels)}};
  }
  std::atomic<int> reads{0};

 private:
  std::vector<DataField> fields_ = {
      {.name = "input", .shape = {2}, .type = torch::kFloat32, .classes = {}},
      {.name = "label", .shape = {}, .type = torch::kInt64, .classes = 3}};
};

BatchRequest RequestFor(int64_t begin, int64_t end) {
  BatchRequest request{{begin, end}, {}};
  for (int64_t position = begin; position < end; ++position)
    request.indices.push_back((position * 7) % 100);
  return request;
}

void ExpectBatchOf(const LoadedBatch& loaded, const BatchRequest& request) {
  ASSERT_EQ(loaded.batch.fields[0].size(0), static_cast<int64_t>(request.indices.size()));
  for (std::size_t k = 0; k < request.indices.size(); ++k) {
    const auto row = static_cast<int64_t>(k);
    EXPECT_EQ(loaded.batch.fields[0][row][0].item<float>(), static_cast<float>(request.indices[k]));
    EXPECT_EQ(loaded.batch.fields[1][row].item<int64_t>(), request.indices[k] % 3);
  }
}

TEST(BatchLoader, TakesPrefetchedBatchesAndLoadsUnaskedOnesOnDemand) {
  CountingDataset dataset;
  const std::unique_ptr<ComputeDevice> device = OpenCpuDevice();
  BatchLoader loader(dataset, *device, 2);
  loader.Prefetch({RequestFor(0, 4), RequestFor(4, 8), RequestFor(8, 12)});
  for (int64_t begin : {0, 4, 8})
    ExpectBatchOf(loader.Take(RequestFor(begin, begin + 4)), RequestFor(begin, begin + 4));
  ExpectBatchOf(loader.Take(RequestFor(20, 25)), RequestFor(20, 25));  // never prefetched
  EXPECT_EQ(dataset.reads.load(), 4);
  EXPECT_EQ(loader.loads_started(), 4);
  EXPECT_EQ(loader.loads_dropped(), 0);
}

TEST(BatchLoader, ARebalanceDropsTheLoadsOfTheOldPlanAndKeepsWhatStillMatches) {
  CountingDataset dataset;
  const std::unique_ptr<ComputeDevice> device = OpenCpuDevice();
  BatchLoader loader(dataset, *device, 1);
  loader.Prefetch({RequestFor(0, 4), RequestFor(16, 20), RequestFor(32, 36)});
  ExpectBatchOf(loader.Take(RequestFor(0, 4)), RequestFor(0, 4));
  // Wait until the later two loads have been done, then change the plan: step 2 now takes 32..37.
  while (loader.loads_started() < 3) std::this_thread::yield();
  loader.Prefetch({RequestFor(16, 20), RequestFor(32, 37)});
  ExpectBatchOf(loader.Take(RequestFor(16, 20)), RequestFor(16, 20));
  ExpectBatchOf(loader.Take(RequestFor(32, 37)), RequestFor(32, 37));
  EXPECT_EQ(loader.loads_dropped(), 1);  // 32..36
}

TEST(BatchLoader, WithoutThreadsEveryBatchIsLoadedWhenTaken) {
  CountingDataset dataset;
  const std::unique_ptr<ComputeDevice> device = OpenCpuDevice();
  BatchLoader loader(dataset, *device, 0);
  loader.Prefetch({RequestFor(0, 4), RequestFor(4, 8)});
  EXPECT_EQ(dataset.reads.load(), 0);
  ExpectBatchOf(loader.Take(RequestFor(4, 8)), RequestFor(4, 8));
  EXPECT_EQ(dataset.reads.load(), 1);
}

TEST(BatchLoader, ALoadsErrorReachesTheStepThatTakesIt) {
  CountingDataset dataset;
  const std::unique_ptr<ComputeDevice> device = OpenCpuDevice();
  BatchLoader loader(dataset, *device, 2);
  BatchRequest bad = RequestFor(0, 2);
  bad.indices = {12, 13};
  loader.Prefetch({bad});
  try {
    loader.Take(bad);
    FAIL() << "took a batch that cannot be read";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "sample 13 cannot be read");
  }
}

}  // namespace
}  // namespace fulcrum::trainer
