// Fuzzes fulcrum-trainer's command line: the input is split at newlines into arguments (a
// line "ENV NAME=VALUE" sets an environment default instead). Parsing returns flags or an
// error naming the flag, and flags it returns pass the checks the trainer relies on.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "trainer_image/trainer/trainer_flags.h"

namespace {

[[noreturn]] void Violated(const char* what) {
  std::fprintf(stderr, "trainer_flags_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(bytes), size);
  std::vector<std::string> args;  // without the program name, as main passes them
  std::map<std::string, std::string> environment;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    if (line.starts_with("ENV ") && line.find('=') != std::string_view::npos) {
      const std::string_view assignment = line.substr(4);
      const std::size_t equals = assignment.find('=');
      environment[std::string(assignment.substr(0, equals))] = assignment.substr(equals + 1);
    } else {
      args.emplace_back(line);
    }
    start = end + 1;
  }
  auto flags = fulcrum::trainer::ParseTrainerFlags(args, environment);
  if (!flags.ok()) {
    (void)flags.error().ToString();
    return 0;
  }
  if (flags->coordinator.empty()) {
    if (flags->world_size < 1 || flags->rank < 0 || flags->rank >= flags->world_size)
      Violated("rank outside [0, world size)");
    if (static_cast<int>(flags->batches.size()) != flags->world_size)
      Violated("not one batch per rank");
    for (int batch : flags->batches) {
      if (batch < 0) Violated("negative batch");
    }
  }
  if (flags->model.classes < 2 || flags->data.synthetic_size < 1 || flags->threads < 1)
    Violated("a size flag below its minimum");
  return 0;
}
