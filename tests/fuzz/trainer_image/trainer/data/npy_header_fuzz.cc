// Fuzzes the .npy header reader on arbitrary bytes: it returns a header or an error naming the
// file, never reads past the input, and a header it returns starts its data inside the input
// with a shape of non-negative dimensions.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "trainer_image/trainer/data/npy_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(bytes), size);
  const fulcrum::Result<fulcrum::trainer::NpyHeader> header =
      fulcrum::trainer::ParseNpyHeader(file, "fuzz.npy");
  if (!header.ok()) {
    if (header.error().field != "fuzz.npy") std::abort();
    return 0;
  }
  if (header->data_offset > size) {
    std::fprintf(stderr, "npy_header_fuzz: data starts past the input\n");
    std::abort();
  }
  for (int64_t dimension : header->shape) {
    if (dimension < 0) std::abort();
  }
  return 0;
}
