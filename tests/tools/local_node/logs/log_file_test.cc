#include "tests/tools/local_node/logs/log_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <string>

#include "tests/support/temporary_directory.h"

namespace fulcrum::local_node {
namespace {

class LogFileReaderTest : public ::testing::Test {
 protected:
  void Append(const std::string& text) {
    std::ofstream(path_, std::ios::app | std::ios::binary) << text;
  }

  // Everything readable from the reader's position now.
  static std::string ReadAll(LogFileReader& reader, std::size_t block = 7) {
    std::string out;
    while (true) {
      Result<std::size_t> read = reader.Read(out, block);
      EXPECT_TRUE(read.ok());
      if (!read.ok() || *read == 0) return out;
    }
  }

  static std::string Tail(LogFileReader& reader, std::int64_t lines) {
    EXPECT_TRUE(reader.SeekToLastLines(lines).ok());
    return ReadAll(reader);
  }

  fulcrum::testing::TemporaryDirectory dir_{"log-file-test"};
  std::filesystem::path path_ = dir_.path() / "main.log";
};

TEST_F(LogFileReaderTest, ReadsAFileThatAppearsLaterAsEmptyUntilThen) {
  LogFileReader reader(path_);
  EXPECT_FALSE(reader.TryOpen());
  EXPECT_EQ(ReadAll(reader), "");
  EXPECT_TRUE(reader.SeekToLastLines(3).ok());
  Append("started\n");
  EXPECT_EQ(ReadAll(reader), "started\n");
}

TEST_F(LogFileReaderTest, ReadsAppendedDataFromWhereItStopped) {
  Append("one\n");
  LogFileReader reader(path_);
  EXPECT_EQ(ReadAll(reader), "one\n");
  Append("two\n");
  EXPECT_EQ(ReadAll(reader), "two\n");
}

TEST_F(LogFileReaderTest, TailsTheLastLines) {
  Append("a\nb\nc\n");
  LogFileReader reader(path_);
  EXPECT_EQ(Tail(reader, 2), "b\nc\n");
}

TEST_F(LogFileReaderTest, CountsAnUnfinishedLastLineAsALine) {
  Append("a\nb\nc");
  LogFileReader reader(path_);
  EXPECT_EQ(Tail(reader, 2), "b\nc");
}

TEST_F(LogFileReaderTest, TailOfMoreLinesThanTheFileHasIsTheWholeFile) {
  Append("a\nb\n");
  LogFileReader reader(path_);
  EXPECT_EQ(Tail(reader, 10), "a\nb\n");
}

TEST_F(LogFileReaderTest, TailOfZeroLinesSkipsTheExistingContentOnly) {
  Append("old\n");
  LogFileReader reader(path_);
  EXPECT_EQ(Tail(reader, 0), "");
  Append("new\n");
  EXPECT_EQ(ReadAll(reader), "new\n");
}

TEST_F(LogFileReaderTest, TailsAcrossReadBlocks) {
  std::string content;
  for (int i = 0; i < 50000; ++i) content += "line " + std::to_string(i) + "\n";
  Append(content);
  LogFileReader reader(path_);
  EXPECT_EQ(Tail(reader, 3), "line 49997\nline 49998\nline 49999\n");
  LogFileReader whole(path_);
  EXPECT_EQ(Tail(whole, 50000), content);
}

TEST_F(LogFileReaderTest, StartsOverWhenTheFileIsTruncated) {
  Append("a long first generation\n");
  LogFileReader reader(path_);
  EXPECT_EQ(ReadAll(reader), "a long first generation\n");
  std::ofstream(path_, std::ios::trunc) << "second\n";
  EXPECT_EQ(ReadAll(reader), "second\n");
}

}  // namespace
}  // namespace fulcrum::local_node
