#include "tests/tools/local_node/podspec/quantity.h"

#include <array>
#include <optional>
#include <string>
#include <utility>

namespace fulcrum::local_node {
namespace {

constexpr int kMaxDigits = 18;  // every 18-digit number fits an int64

struct Suffix {
  std::string_view text;
  int exponent10;
  int exponent2;
};
constexpr std::array<Suffix, 16> kSuffixes{{
    {"", 0, 0},
    {"n", -9, 0},
    {"u", -6, 0},
    {"m", -3, 0},
    {"k", 3, 0},
    {"M", 6, 0},
    {"G", 9, 0},
    {"T", 12, 0},
    {"P", 15, 0},
    {"E", 18, 0},
    {"Ki", 0, 10},
    {"Mi", 0, 20},
    {"Gi", 0, 30},
    {"Ti", 0, 40},
    {"Pi", 0, 50},
    {"Ei", 0, 60},
}};

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

Error Invalid(std::string_view text, std::string_view why) {
  return MakeError(ErrorCode::kInvalidArgument,
                   "quantity \"" + std::string(text) + "\" " + std::string(why) +
                       "; write it as Kubernetes does, e.g. \"500m\", \"2\", \"1Gi\"");
}

std::optional<int> ParseExponent(std::string_view digits) {
  bool negative = false;
  if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
    negative = digits[0] == '-';
    digits.remove_prefix(1);
  }
  if (digits.empty() || digits.size() > 4) return std::nullopt;
  int value = 0;
  for (char c : digits) {
    if (!IsDigit(c)) return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return negative ? -value : value;
}

std::optional<std::int64_t> PowerOfTen(int exponent) {
  std::int64_t power = 1;
  for (int i = 0; i < exponent; ++i) {
    if (__builtin_mul_overflow(power, 10, &power)) return std::nullopt;
  }
  return power;
}

}  // namespace

Result<Quantity> Quantity::Parse(std::string_view text) {
  std::string_view rest = text;
  if (!rest.empty() && rest[0] == '+') rest.remove_prefix(1);
  if (!rest.empty() && rest[0] == '-') return Invalid(text, "is negative");

  std::int64_t mantissa = 0;
  int significant_digits = 0;
  int fraction_digits = 0;
  bool seen_point = false;
  bool seen_digit = false;
  std::size_t position = 0;
  for (; position < rest.size(); ++position) {
    const char c = rest[position];
    if (c == '.' && !seen_point) {
      seen_point = true;
      continue;
    }
    if (!IsDigit(c)) break;
    seen_digit = true;
    if (mantissa == 0 && c == '0') {
      if (seen_point) ++fraction_digits;  // leading zeros only shift the scale
      continue;
    }
    if (++significant_digits > kMaxDigits) return Invalid(text, "has too many digits");
    mantissa = mantissa * 10 + (c - '0');
    if (seen_point) ++fraction_digits;
  }
  if (!seen_digit) return Invalid(text, "has no number");

  const std::string_view suffix = rest.substr(position);
  int exponent10 = -fraction_digits;
  int exponent2 = 0;
  // The suffix table comes first: "E" and "Ei" are suffixes, "E3" an exponent.
  bool known = false;
  for (const Suffix& candidate : kSuffixes) {
    if (candidate.text == suffix) {
      exponent10 += candidate.exponent10;
      exponent2 = candidate.exponent2;
      known = true;
      break;
    }
  }
  if (!known) {
    if (suffix.empty() || (suffix[0] != 'e' && suffix[0] != 'E')) {
      return Invalid(text, "has an unknown suffix \"" + std::string(suffix) + "\"");
    }
    std::optional<int> exponent = ParseExponent(suffix.substr(1));
    if (!exponent) return Invalid(text, "has a malformed exponent");
    exponent10 += *exponent;
  }
  return Quantity(mantissa, exponent10, exponent2);
}

Result<std::int64_t> Quantity::ScaledCeil(int scale) const {
  const Error overflow = MakeError(ErrorCode::kInvalidArgument,
                                   "quantity is too large to express as a 64-bit integer");
  std::int64_t value = mantissa_;
  if (exponent2_ >= 63 && value != 0) return overflow;
  if (value != 0 && __builtin_mul_overflow(value, std::int64_t{1} << exponent2_, &value))
    return overflow;
  const int exponent = exponent10_ + scale;
  if (exponent >= 0) {
    std::optional<std::int64_t> power = PowerOfTen(exponent);
    if (value == 0) return std::int64_t{0};
    if (!power || __builtin_mul_overflow(value, *power, &value)) return overflow;
    return value;
  }
  // value < 2^63 < 10^19: dividing by 10^19 or more leaves a fraction that rounds up to 1.
  std::optional<std::int64_t> divisor = PowerOfTen(-exponent);
  if (!divisor) return std::int64_t{value > 0 ? 1 : 0};
  return value / *divisor + (value % *divisor != 0 ? 1 : 0);
}

}  // namespace fulcrum::local_node
