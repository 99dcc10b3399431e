#include "tests/trainer_image/harness/process_harness.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace fulcrum::testing {

std::vector<nlohmann::json> ReadJsonLines(const std::string& path, const std::string& msg) {
  std::vector<nlohmann::json> lines;
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line.front() != '{') continue;
    nlohmann::json value = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) continue;
    if (!msg.empty() && value.value("msg", "") != msg) continue;
    lines.push_back(std::move(value));
  }
  return lines;
}

std::string FreshDirectory(const std::string& name) {
  const char* binary_dir = std::getenv("FULCRUM_BINARY_DIR");
  const std::filesystem::path root =
      std::filesystem::path(binary_dir != nullptr ? binary_dir : "/tmp") / "test-output" / name;
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  return root.string();
}

void WriteFile(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  std::ofstream(temporary) << text;
  std::filesystem::rename(temporary, path);
}

}  // namespace fulcrum::testing
