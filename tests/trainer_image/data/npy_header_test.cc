// The .npy header reader: what NumPy writes is read back; what it does not write is refused
// with the file named.
#include "trainer_image/trainer/data/npy_header.h"

#include <gtest/gtest.h>

#include <cstring>

namespace fulcrum::trainer {
namespace {

std::vector<std::byte> NpyBytes(const std::string& dict, unsigned major = 1) {
  std::string header = dict;
  const std::size_t prefix = major == 1 ? 10 : 12;
  header.append(64 - (prefix + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string file = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  const auto length = static_cast<uint32_t>(header.size());
  file += static_cast<char>(length & 0xFF);
  file += static_cast<char>((length >> 8) & 0xFF);
  if (major != 1) file += std::string(2, '\0');
  file += header;
  std::vector<std::byte> bytes(file.size());
  std::memcpy(bytes.data(), file.data(), file.size());
  return bytes;
}

TEST(NpyHeader, ReadsTheHeaderNumPyWrites) {
  const auto bytes =
      NpyBytes("{'descr': '|u1', 'fortran_order': False, 'shape': (50000, 3, 32, 32), }");
  const Result<NpyHeader> header = ParseNpyHeader(bytes, "image.npy");
  ASSERT_TRUE(header.ok()) << header.error().ToString();
  EXPECT_EQ(header->descr, "|u1");
  EXPECT_FALSE(header->fortran_order);
  EXPECT_EQ(header->shape, (std::vector<int64_t>{50000, 3, 32, 32}));
  EXPECT_EQ(header->data_offset % 64, 0u);
  EXPECT_EQ(header->data_offset, bytes.size());
}

TEST(NpyHeader, ReadsOneDimensionalShapesAndVersionTwo) {
  const Result<NpyHeader> labels =
      ParseNpyHeader(NpyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (7,), }"), "l");
  ASSERT_TRUE(labels.ok()) << labels.error().ToString();
  EXPECT_EQ(labels->shape, (std::vector<int64_t>{7}));
  const Result<NpyHeader> v2 =
      ParseNpyHeader(NpyBytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3)}", 2), "f");
  ASSERT_TRUE(v2.ok()) << v2.error().ToString();
  EXPECT_TRUE(v2->fortran_order);
  EXPECT_EQ(v2->shape, (std::vector<int64_t>{2, 3}));
}

TEST(NpyHeader, RefusesWhatIsNotANpyFileNamingIt) {
  const std::string text = "label,image\n1,2\n";
  std::vector<std::byte> csv(text.size());
  std::memcpy(csv.data(), text.data(), text.size());
  const Result<NpyHeader> header = ParseNpyHeader(csv, "data/image.npy");
  ASSERT_FALSE(header.ok());
  EXPECT_EQ(header.error().field, "data/image.npy");
  EXPECT_NE(header.error().message.find("magic"), std::string::npos);
}

TEST(NpyHeader, RefusesATruncatedHeaderAndMissingKeys) {
  auto bytes = NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }");
  bytes.resize(30);
  EXPECT_FALSE(ParseNpyHeader(bytes, "x").ok());
  EXPECT_FALSE(ParseNpyHeader(NpyBytes("{'descr': '<f4', 'shape': (2,), }"), "x").ok());
  EXPECT_FALSE(
      ParseNpyHeader(NpyBytes("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }"), "x").ok());
  EXPECT_FALSE(
      ParseNpyHeader(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }"), "x")
          .ok());
  EXPECT_FALSE(ParseNpyHeader(NpyBytes("{'descr': '<f4'}", 9), "x").ok());
}

}  // namespace
}  // namespace fulcrum::trainer
