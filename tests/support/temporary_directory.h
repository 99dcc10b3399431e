// A fresh folder for one test, removed with everything in it when the test is done.
#pragma once

#include <filesystem>
#include <string>

namespace fulcrum::testing {

class TemporaryDirectory {
 public:
  // Creates <system temp dir>/<prefix>-XXXXXX; aborts the test binary if it cannot.
  explicit TemporaryDirectory(const std::string& prefix);
  ~TemporaryDirectory();
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace fulcrum::testing
