// Checkpoint files keep the progress an epoch job counts its length in (equivalent samples),
// read files written before that field existed as having trained every step at efficiency 1,
// and refuse a value no trainer writes, naming it.
#include "trainer_image/trainer/state/checkpoint_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>

namespace fulcrum::trainer {
namespace {

constexpr std::size_t kMagicBytes = 16;
constexpr std::size_t kAlignment = 64;

std::vector<StateTensor> SmallState() {
  return {{"parameter", "fc.weight", torch::arange(6, torch::kFloat32).reshape({2, 3})}};
}

// The file with its JSON header changed by `edit`, laid out and checksummed again as
// docs/checkpoint-format.md describes: what an older or a different writer would produce.
std::vector<std::byte> WithHeaderEdited(const std::vector<std::byte>& file,
                                        const std::function<void(nlohmann::json&)>& edit) {
  uint64_t header_length = 0;
  std::memcpy(&header_length, file.data() + kMagicBytes, sizeof header_length);
  auto align = [](std::size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; };
  const std::size_t data_start = align(kMagicBytes + 8 + header_length);
  nlohmann::json header = nlohmann::json::parse(
      std::string(reinterpret_cast<const char*>(file.data()) + kMagicBytes + 8, header_length));
  edit(header);
  const std::string text = header.dump();
  const std::size_t new_start = align(kMagicBytes + 8 + text.size());
  const std::size_t data_bytes = file.size() - 8 - data_start;
  std::vector<std::byte> out(new_start + data_bytes + 8);
  std::memcpy(out.data(), file.data(), kMagicBytes);
  const uint64_t length = text.size();
  std::memcpy(out.data() + kMagicBytes, &length, sizeof length);
  std::memcpy(out.data() + kMagicBytes + 8, text.data(), text.size());
  std::memcpy(out.data() + new_start, file.data() + data_start, data_bytes);
  const uint64_t hash = Fnv1a(std::span(out).first(out.size() - 8));
  std::memcpy(out.data() + out.size() - 8, &hash, sizeof hash);
  return out;
}

TEST(CheckpointFile, EquivalentSamplesSurviveARoundTrip) {
  const Progress progress{.step = 40, .cursor = 1900, .equivalent_samples = 1234.5625};
  const auto read = DecodeCheckpoint(EncodeCheckpoint(SmallState(), progress, {}), "test.bin");
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  EXPECT_EQ(read->progress.step, 40);
  EXPECT_EQ(read->progress.cursor, 1900);
  EXPECT_EQ(read->progress.equivalent_samples, 1234.5625);
}

TEST(CheckpointFile, AFileWithoutEquivalentSamplesCountsItsCursor) {
  const Progress progress{.step = 40, .cursor = 1900, .equivalent_samples = 1900.0};
  const auto older =
      WithHeaderEdited(EncodeCheckpoint(SmallState(), progress, {}),
                       [](nlohmann::json& header) { header.erase("equivalent_samples"); });
  const auto read = DecodeCheckpoint(older, "older.bin");
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  EXPECT_EQ(read->progress.equivalent_samples, 1900.0);
}

TEST(CheckpointFile, NegativeOrMissingEquivalentSamplesAreRefusedNamingThem) {
  const Progress progress{.step = 40, .cursor = 1900, .equivalent_samples = 1900.0};
  const auto file = EncodeCheckpoint(SmallState(), progress, {});
  for (const nlohmann::json& bad : {nlohmann::json(-1.0), nlohmann::json(nullptr)}) {
    const auto edited =
        WithHeaderEdited(file, [&](nlohmann::json& header) { header["equivalent_samples"] = bad; });
    const auto read = DecodeCheckpoint(edited, "bad.bin");
    ASSERT_FALSE(read.ok()) << bad;
    EXPECT_NE(read.error().ToString().find("bad.bin"), std::string::npos);
    EXPECT_NE(read.error().ToString().find("equivalent_samples"), std::string::npos)
        << read.error().ToString();
  }
}

}  // namespace
}  // namespace fulcrum::trainer
