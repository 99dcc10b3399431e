// --data-file records read back as written; a file of the wrong size, a record past the end or
// one whose label is not a class is an error naming the file and the record.
#include "trainer_image/trainer/data/record_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "tests/support/temporary_directory.h"

namespace fulcrum::trainer {
namespace {

std::string Records(const std::vector<std::pair<std::vector<float>, int32_t>>& records) {
  std::string bytes;
  for (const auto& [features, label] : records) {
    bytes.append(reinterpret_cast<const char*>(features.data()), features.size() * 4);
    bytes.append(reinterpret_cast<const char*>(&label), 4);
  }
  return bytes;
}

class RecordFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& bytes) {
    const std::string path = (temp_.path() / "records.bin").string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  fulcrum::testing::TemporaryDirectory temp_{"record-file-test"};
};

TEST_F(RecordFileTest, ReadsRecordsBackAsWritten) {
  auto file = RecordFile::Open(Write(Records({{{1.5f, -2.0f}, 0}, {{3.0f, 4.25f}, 2}})), 2, 3);
  ASSERT_TRUE(file.ok()) << file.error().ToString();
  EXPECT_EQ(file->size(), 2);
  std::vector<float> x(2);
  auto label = file->Read(1, x);
  ASSERT_TRUE(label.ok()) << label.error().ToString();
  EXPECT_EQ(*label, 2);
  EXPECT_EQ(x, (std::vector<float>{3.0f, 4.25f}));
}

TEST_F(RecordFileTest, RefusesAFileThatIsNotWholeRecords) {
  EXPECT_FALSE(RecordFile::Open(Write(""), 2, 3).ok());
  EXPECT_FALSE(RecordFile::Open(Write(Records({{{1.0f, 2.0f}, 0}}) + "x"), 2, 3).ok());
  EXPECT_EQ(RecordFile::Open(Write("x"), 2, 3).error().field, "--data-file");
  EXPECT_FALSE(RecordFile::Open((temp_.path() / "absent").string(), 2, 3).ok());
}

// A label outside [0, classes) used to reach cross_entropy, which failed far from the cause
// (record_file_fuzz's seed label_out_of_range).
TEST_F(RecordFileTest, ALabelThatIsNotAClassNamesTheRecord) {
  auto file = RecordFile::Open(Write(Records({{{0.5f}, 1}, {{0.5f}, 7}, {{0.5f}, -1}})), 1, 4);
  ASSERT_TRUE(file.ok());
  std::vector<float> x(1);
  EXPECT_TRUE(file->Read(0, x).ok());
  for (int64_t index : {1, 2}) {
    auto label = file->Read(index, x);
    ASSERT_FALSE(label.ok());
    EXPECT_NE(label.error().message.find("record " + std::to_string(index)), std::string::npos)
        << label.error().message;
  }
  EXPECT_FALSE(file->Read(3, x).ok());   // past the end
  EXPECT_FALSE(file->Read(-1, x).ok());  // before the start
}

TEST_F(RecordFileTest, AFileThatShrankIsAnErrorNotGarbage) {
  const std::string path = Write(Records({{{1.0f}, 0}, {{2.0f}, 1}}));
  auto file = RecordFile::Open(path, 1, 2);
  ASSERT_TRUE(file.ok());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << Records({{{1.0f}, 0}});
  std::vector<float> x(1);
  EXPECT_FALSE(file->Read(1, x).ok());
}

}  // namespace
}  // namespace fulcrum::trainer
