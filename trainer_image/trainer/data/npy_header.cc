#include "trainer_image/trainer/data/npy_header.h"

#include <cctype>
#include <charconv>
#include <cstring>
#include <limits>
#include <string_view>

namespace fulcrum::trainer {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
// NumPy writes headers of a few hundred bytes; anything far larger is not a real header.
constexpr std::size_t kMaxHeaderBytes = 1 << 20;

// A reader of the header's Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (50000, 3, 32, 32), }
// Only the literals NumPy writes there are understood (strings, True/False, tuples of integers).
// Hand-written: the literal is Python syntax, not JSON, and nothing in our dependencies reads it.
class DictReader {
 public:
  explicit DictReader(std::string_view text) : text_(text) {}

  bool Done() {
    SkipSpace();
    return position_ == text_.size();
  }
  bool Take(char c) {
    SkipSpace();
    if (position_ < text_.size() && text_[position_] == c) {
      ++position_;
      return true;
    }
    return false;
  }
  bool String(std::string& out) {
    SkipSpace();
    if (position_ >= text_.size()) return false;
    const char quote = text_[position_];
    if (quote != '\'' && quote != '"') return false;
    const std::size_t end = text_.find(quote, position_ + 1);
    if (end == std::string_view::npos) return false;
    out = std::string(text_.substr(position_ + 1, end - position_ - 1));
    position_ = end + 1;
    return true;
  }
  bool Bool(bool& out) {
    SkipSpace();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (text_.substr(position_).starts_with(word)) {
        position_ += std::strlen(word);
        out = value;
        return true;
      }
    }
    return false;
  }
  // (), (5,), (5, 3, 32, 32) -- a tuple of non-negative integers.
  bool Shape(std::vector<int64_t>& out) {
    if (!Take('(')) return false;
    out.clear();
    while (!Take(')')) {
      if (!out.empty() && !Take(',')) return false;
      if (Take(')')) break;  // the trailing comma of (5,)
      SkipSpace();
      int64_t dimension = 0;
      const char* begin = text_.data() + position_;
      const auto [end, error] = std::from_chars(begin, text_.data() + text_.size(), dimension);
      if (error != std::errc() || dimension < 0 || out.size() >= 32) return false;
      position_ += static_cast<std::size_t>(end - begin);
      out.push_back(dimension);
    }
    return true;
  }

 private:
  void SkipSpace() {
    while (position_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[position_])))
      ++position_;
  }
  std::string_view text_;
  std::size_t position_ = 0;
};

}  // namespace

Result<NpyHeader> ParseNpyHeader(std::span<const std::byte> file, const std::string& path) {
  auto refuse = [&](const std::string& why) {
    return InvalidArgument(path, why + " (write fields with numpy.save or fulcrum-pack)");
  };
  const auto* bytes = reinterpret_cast<const unsigned char*>(file.data());
  if (file.size() < kMagic.size() + 2 || std::memcmp(bytes, kMagic.data(), kMagic.size()) != 0) {
    return refuse("is not a NumPy .npy file (no \\x93NUMPY magic)");
  }
  const unsigned major = bytes[kMagic.size()];
  std::size_t length_bytes = 0;
  if (major == 1) {
    length_bytes = 2;
  } else if (major == 2 || major == 3) {
    length_bytes = 4;
  } else {
    return refuse(".npy format version " + std::to_string(major) + " is not 1, 2 or 3");
  }
  const std::size_t prefix = kMagic.size() + 2 + length_bytes;
  if (file.size() < prefix) return refuse("is truncated inside its header");
  std::size_t header_length = 0;
  for (std::size_t i = 0; i < length_bytes; ++i)  // little-endian
    header_length |= static_cast<std::size_t>(bytes[kMagic.size() + 2 + i]) << (8 * i);
  if (header_length > kMaxHeaderBytes || prefix + header_length > file.size()) {
    return refuse("is truncated inside its header (" + std::to_string(header_length) +
                  " header bytes declared)");
  }
  NpyHeader header;
  header.data_offset = prefix + header_length;
  DictReader reader(std::string_view(reinterpret_cast<const char*>(bytes + prefix), header_length));
  bool seen_descr = false, seen_order = false, seen_shape = false;
  if (!reader.Take('{')) return refuse("has a header that is not a dict");
  while (!reader.Take('}')) {
    std::string key;
    if (!reader.String(key) || !reader.Take(':')) return refuse("has a malformed header dict");
    bool ok = false;
    if (key == "descr" && !seen_descr) {
      ok = seen_descr = reader.String(header.descr);
    } else if (key == "fortran_order" && !seen_order) {
      ok = seen_order = reader.Bool(header.fortran_order);
    } else if (key == "shape" && !seen_shape) {
      ok = seen_shape = reader.Shape(header.shape);
    }
    if (!ok) return refuse("has an unexpected or malformed header entry '" + key + "'");
    if (!reader.Take(',')) {
      if (!reader.Take('}')) return refuse("has a malformed header dict");
      break;
    }
  }
  if (!reader.Done()) return refuse("has text after its header dict");
  if (!seen_descr || !seen_order || !seen_shape) {
    return refuse("has a header without 'descr', 'fortran_order' and 'shape'");
  }
  return header;
}

}  // namespace fulcrum::trainer
