// Helpers for multi-process trainer tests: processes (tests/support/child_process.h), JSON log
// lines, fresh folders, files written atomically.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/polling.h"

namespace fulcrum::testing {

// Every JSON line of a file (others skipped), optionally only those with "msg" == msg.
std::vector<nlohmann::json> ReadJsonLines(const std::string& path, const std::string& msg = "");
// A fresh empty directory under the build tree (or /tmp) for one test.
std::string FreshDirectory(const std::string& name);
void WriteFile(const std::string& path, const std::string& text);

}  // namespace fulcrum::testing
