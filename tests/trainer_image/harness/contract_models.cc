#include "tests/trainer_image/harness/contract_models.h"

#include <filesystem>
#include <iostream>

#include "tests/support/subprocess.h"
#include "tests/trainer_image/harness/process_harness.h"

namespace fulcrum::testing {

const std::string& ContractModels() {
  static const std::string directory = [] {
    // One folder per test binary: ctest runs equivalence and model-contract tests at once, and a
    // shared one was emptied by the one while the other trained from it.
    const std::string made = FreshDirectory(
        "contract-models-" + std::filesystem::read_symlink("/proc/self/exe").filename().string());
    const CommandResult run =
        RunShell("/usr/bin/python3 " +
                 ShellQuote(std::string(FULCRUM_SOURCE_DIR) +
                            "/tests/trainer_image/model/make_contract_models.py") +
                 " " + ShellQuote(made) + " 2>&1");
    if (run.exit_code != 0) {
      std::cerr << "make_contract_models.py failed:\n" << run.output << "\n";
      return std::string();
    }
    return made;
  }();
  return directory;
}

}  // namespace fulcrum::testing
