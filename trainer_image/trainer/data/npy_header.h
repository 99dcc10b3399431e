// The header of a NumPy .npy file (numpy.lib.format versions 1.0, 2.0 and 3.0): the element
// type, the order and the shape, and where the data starts. Torch-free and allocation-bounded,
// so it is fuzzed; the file's data is mapped elsewhere (mapped_file.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace fulcrum::trainer {

struct NpyHeader {
  std::string descr;  // the typestr as written: "|u1", "<f4", ...
  bool fortran_order = false;
  std::vector<int64_t> shape;
  std::size_t data_offset = 0;  // bytes from the start of the file to the first element
};

// Parses the header at the start of `file` (the whole file or at least its header). `path` only
// names the file in errors. Refuses what is not a .npy file, an unknown version, a header that
// runs past the file, and a dict without exactly 'descr', 'fortran_order' and 'shape'.
Result<NpyHeader> ParseNpyHeader(std::span<const std::byte> file, const std::string& path);

}  // namespace fulcrum::trainer
