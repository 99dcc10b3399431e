// Fuzzes dataset.json parsing on arbitrary text: a spec or an error naming dataset.json; a spec
// it returns is either shards or a dataset with samples >= 1 and fields whose names, files and
// sizes are sane (no path leaves the directory, no sample size overflows).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "trainer_image/trainer/data/dataset_spec.h"

namespace {

[[noreturn]] void Violated(const char* what) {
  std::fprintf(stderr, "dataset_spec_fuzz: %s\n", what);
  std::abort();
}

bool Plain(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(bytes), size);
  const auto spec = fulcrum::trainer::ParseDatasetSpec(text, "dataset.json");
  if (!spec.ok()) {
    if (!spec.error().field.starts_with("dataset.json")) Violated("error not naming the file");
    return 0;
  }
  if (!spec->shards.empty()) {
    for (const std::string& shard : spec->shards) {
      if (!Plain(shard)) Violated("a shard outside the directory");
    }
    return 0;
  }
  if (spec->samples < 1 || spec->fields.empty()) Violated("no samples or no fields");
  for (const auto& field : spec->fields) {
    if (!Plain(field.file)) Violated("a field file outside the directory");
    if (field.ElementsPerSample() < 1 || field.ElementsPerSample() > (int64_t{1} << 32))
      Violated("a sample size out of bounds");
    if (field.classes && (*field.classes < 1 || !fulcrum::trainer::IsInteger(field.type)))
      Violated("classes on a non-integer field");
  }
  return 0;
}
