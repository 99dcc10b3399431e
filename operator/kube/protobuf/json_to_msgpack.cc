#include "operator/kube/protobuf/json_to_msgpack.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "operator/kube/protobuf/utf8.h"

namespace fulcrum::kube::protobuf {
namespace {

constexpr int kMaxJsonDepth = 256;

bool IsSpace(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// Two passes over the text: Scan validates it and records how many members or elements each
// object and array has (MessagePack writes counts first), in the order they open; Emit writes.
class Converter {
 public:
  explicit Converter(std::string_view text) : text_(text) {}

  bool Scan() {
    position_ = 0;
    if (!ScanValue(0)) return false;
    SkipSpace();
    return position_ == text_.size();
  }

  void Emit(MsgpackWriter& out) {
    position_ = 0;
    next_count_ = 0;
    EmitValue(out);
  }

 private:
  void SkipSpace() {
    while (position_ < text_.size() && IsSpace(text_[position_])) ++position_;
  }
  bool Literal(std::string_view word) {
    if (text_.substr(position_, word.size()) != word) return false;
    position_ += word.size();
    return true;
  }

  bool ScanValue(int depth) {
    if (depth > kMaxJsonDepth) return false;
    SkipSpace();
    if (position_ >= text_.size()) return false;
    const char c = text_[position_];
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      const std::size_t slot = counts_.size();
      counts_.push_back(0);
      ++position_;
      SkipSpace();
      if (position_ < text_.size() && text_[position_] == close) {
        ++position_;
        return true;
      }
      while (true) {
        if (c == '{') {
          SkipSpace();
          if (position_ >= text_.size() || text_[position_] != '"' || !ScanString(nullptr))
            return false;
          SkipSpace();
          if (position_ >= text_.size() || text_[position_] != ':') return false;
          ++position_;
        }
        if (!ScanValue(depth + 1)) return false;
        ++counts_[slot];
        SkipSpace();
        if (position_ >= text_.size()) return false;
        if (text_[position_] == ',') {
          ++position_;
          continue;
        }
        if (text_[position_] != close) return false;
        ++position_;
        return true;
      }
    }
    if (c == '"') return ScanString(nullptr);
    if (c == 't') return Literal("true");
    if (c == 'f') return Literal("false");
    if (c == 'n') return Literal("null");
    return ScanNumber(nullptr);
  }

  static bool AppendUtf8(std::uint32_t code, std::string& out) {
    if (code < 0x80) {
      out.push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (code >> 6)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
    } else if (code < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (code >> 12)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
    } else if (code < 0x110000) {
      out.push_back(static_cast<char>(0xf0 | (code >> 18)));
      out.push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
    } else {
      return false;
    }
    return true;
  }

  bool Hex4(std::uint32_t& value) {
    if (text_.size() - position_ < 4) return false;
    value = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[position_++];
      value <<= 4;
      if (h >= '0' && h <= '9')
        value |= static_cast<std::uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        value |= static_cast<std::uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        value |= static_cast<std::uint32_t>(h - 'A' + 10);
      else
        return false;
    }
    return true;
  }

  // At an opening quote. With `out`, also writes the unescaped text there.
  bool ScanString(std::string* out) {
    ++position_;
    while (position_ < text_.size()) {
      // Copy the run up to the next quote or backslash at once.
      std::size_t end = position_;
      while (end < text_.size() && text_[end] != '"' && text_[end] != '\\') {
        const auto byte = static_cast<unsigned char>(text_[end]);
        if (byte < 0x20) return false;
        if (byte < 0x80) {
          ++end;
          continue;
        }
        // JSON text is UTF-8 (RFC 8259); what is not could not be written out again.
        const std::size_t length = Utf8SequenceLength(text_, end);
        if (length == 0) return false;
        end += length;
      }
      if (out != nullptr) out->append(text_.substr(position_, end - position_));
      position_ = end;
      if (position_ >= text_.size()) return false;
      if (text_[position_] == '"') {
        ++position_;
        return true;
      }
      ++position_;  // backslash
      if (position_ >= text_.size()) return false;
      const char escape = text_[position_++];
      char plain = 0;
      switch (escape) {
        case '"':
          plain = '"';
          break;
        case '\\':
          plain = '\\';
          break;
        case '/':
          plain = '/';
          break;
        case 'b':
          plain = '\b';
          break;
        case 'f':
          plain = '\f';
          break;
        case 'n':
          plain = '\n';
          break;
        case 'r':
          plain = '\r';
          break;
        case 't':
          plain = '\t';
          break;
        case 'u': {
          std::uint32_t code = 0;
          if (!Hex4(code)) return false;
          if (code >= 0xd800 && code <= 0xdbff) {  // a surrogate pair
            std::uint32_t low = 0;
            if (!Literal("\\u") || !Hex4(low) || low < 0xdc00 || low > 0xdfff) return false;
            code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
          } else if (code >= 0xdc00 && code <= 0xdfff) {
            return false;
          }
          std::string utf8;
          if (!AppendUtf8(code, utf8)) return false;
          if (out != nullptr) out->append(utf8);
          continue;
        }
        default:
          return false;
      }
      if (out != nullptr) out->push_back(plain);
    }
    return false;
  }

  // With `out`, also writes the number.
  bool ScanNumber(MsgpackWriter* out) {
    const std::size_t start = position_;
    if (position_ < text_.size() && text_[position_] == '-') ++position_;
    const std::size_t digits = position_;
    while (position_ < text_.size() && text_[position_] >= '0' && text_[position_] <= '9')
      ++position_;
    if (position_ == digits) return false;
    if (text_[digits] == '0' && position_ - digits > 1) return false;  // no leading zeros
    bool integer = true;
    if (position_ < text_.size() && text_[position_] == '.') {
      integer = false;
      const std::size_t fraction = ++position_;
      while (position_ < text_.size() && text_[position_] >= '0' && text_[position_] <= '9')
        ++position_;
      if (position_ == fraction) return false;
    }
    const bool exponent =
        position_ < text_.size() && (text_[position_] == 'e' || text_[position_] == 'E');
    if (exponent) {
      integer = false;
      ++position_;
      if (position_ < text_.size() && (text_[position_] == '+' || text_[position_] == '-'))
        ++position_;
      const std::size_t exponent_digits = position_;
      while (position_ < text_.size() && text_[position_] >= '0' && text_[position_] <= '9')
        ++position_;
      if (position_ == exponent_digits) return false;
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + position_;
    if (out == nullptr) {
      // As nlohmann::json does, refuse a number past a double's range (1e400, or a 400-digit
      // integer): it would become infinity, which JSON cannot write (found by
      // json_to_msgpack_fuzz). Only an exponent or some 300 digits can overflow.
      const bool may_overflow = exponent || position_ - start > 300;
      return !may_overflow || std::isfinite(std::strtod(std::string(first, last).c_str(), nullptr));
    }
    if (integer) {
      // As nlohmann::json does: non-negative integers as unsigned, negative as signed,
      // and integers too large for 64 bits as floating point.
      if (*first != '-') {
        std::uint64_t value = 0;
        if (std::from_chars(first, last, value).ec == std::errc()) {
          out->UInt(value);
          return true;
        }
      } else {
        std::int64_t value = 0;
        if (std::from_chars(first, last, value).ec == std::errc()) {
          out->Int(value);
          return true;
        }
      }
    }
    out->Double(std::strtod(std::string(first, last).c_str(), nullptr));
    return true;
  }

  void EmitValue(MsgpackWriter& out) {
    SkipSpace();
    const char c = text_[position_];
    if (c == '{' || c == '[') {
      const std::uint32_t count = counts_[next_count_++];
      if (c == '{') {
        out.MapHeader(count);
      } else {
        out.ArrayHeader(count);
      }
      ++position_;
      for (std::uint32_t i = 0; i < count; ++i) {
        SkipSpace();
        if (text_[position_] == ',') ++position_;
        if (c == '{') {
          SkipSpace();
          scratch_.clear();
          ScanString(&scratch_);
          out.String(scratch_);
          SkipSpace();
          ++position_;  // ':'
        }
        EmitValue(out);
      }
      SkipSpace();
      ++position_;  // closing bracket
      return;
    }
    if (c == '"') {
      scratch_.clear();
      ScanString(&scratch_);
      out.String(scratch_);
    } else if (c == 't') {
      position_ += 4;
      out.Bool(true);
    } else if (c == 'f') {
      position_ += 5;
      out.Bool(false);
    } else if (c == 'n') {
      position_ += 4;
      out.Nil();
    } else {
      ScanNumber(&out);
    }
  }

  std::string_view text_;
  std::size_t position_ = 0;
  std::vector<std::uint32_t> counts_;
  std::size_t next_count_ = 0;
  std::string scratch_;
};
}  // namespace

bool JsonToMsgpack(std::string_view json, MsgpackWriter& out) {
  Converter converter(json);
  if (!converter.Scan()) return false;
  converter.Emit(out);
  return true;
}

}  // namespace fulcrum::kube::protobuf
