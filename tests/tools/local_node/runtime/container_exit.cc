#include "tests/tools/local_node/runtime/container_exit.h"

#include <sys/wait.h>

namespace fulcrum::local_node {

nlohmann::json ToJson(const ContainerExit& exit) {
  return {{"exitCode", exit.exit_code},   {"signal", exit.signal},
          {"reason", exit.reason},        {"message", exit.message},
          {"startedAt", exit.started_at}, {"finishedAt", exit.finished_at}};
}

ContainerExit ContainerExitFromJson(const nlohmann::json& json) {
  ContainerExit exit;
  if (!json.is_object()) return exit;
  const auto number = [&](const char* key) {
    const auto found = json.find(key);
    return found != json.end() && found->is_number_integer() ? found->get<int>() : 0;
  };
  const auto text = [&](const char* key) {
    const auto found = json.find(key);
    return found != json.end() && found->is_string() ? found->get<std::string>() : std::string();
  };
  exit.exit_code = number("exitCode");
  exit.signal = number("signal");
  exit.reason = text("reason");
  exit.message = text("message");
  exit.started_at = text("startedAt");
  exit.finished_at = text("finishedAt");
  return exit;
}

ContainerExit ExitFromWaitStatus(int wait_status, std::string started_at, std::string finished_at) {
  ContainerExit exit;
  if (WIFSIGNALED(wait_status)) {
    exit.signal = WTERMSIG(wait_status);
    exit.exit_code = 128 + exit.signal;
  } else {
    exit.exit_code = WEXITSTATUS(wait_status);
  }
  // containerd's reasons: Completed for a clean exit, Error for anything else.
  exit.reason = exit.exit_code == 0 ? "Completed" : "Error";
  exit.started_at = std::move(started_at);
  exit.finished_at = std::move(finished_at);
  return exit;
}

}  // namespace fulcrum::local_node
