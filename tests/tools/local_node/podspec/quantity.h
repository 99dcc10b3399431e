// Kubernetes resource quantities ("500m", "1.5Gi", "2e3") read exactly, for the
// downward API's resourceFieldRef. Exact integer arithmetic, not floating point,
// so that "0.1" CPU is 100 millicores and not 101 after rounding up.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/result.h"

namespace fulcrum::local_node {

class Quantity {
 public:
  // The apimachinery grammar: [+]digits[.digits] followed by a binary suffix
  // (Ki..Ei), a decimal one (n, u, m, "", k, M, G, T, P, E) or an exponent (e3, E-2).
  // Negative quantities are refused: no resource this agent reads can be negative.
  static Result<Quantity> Parse(std::string_view text);

  bool IsZero() const { return mantissa_ == 0; }
  // ceil(quantity * 10^scale): Value() is ScaledCeil(0), MilliValue() ScaledCeil(3),
  // both rounding up as apimachinery's do. kInvalidArgument when it overflows int64.
  Result<std::int64_t> ScaledCeil(int scale) const;

 private:
  Quantity(std::int64_t mantissa, int exponent10, int exponent2)
      : mantissa_(mantissa), exponent10_(exponent10), exponent2_(exponent2) {}

  std::int64_t mantissa_;  // the quantity is mantissa_ * 10^exponent10_ * 2^exponent2_
  int exponent10_;
  int exponent2_;
};

}  // namespace fulcrum::local_node
