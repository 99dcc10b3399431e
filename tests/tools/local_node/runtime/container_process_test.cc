// The shim and the agent's handle on it, with real processes (the shim is the
// fulcrum-local-node binary, as the agent runs it).
#include "tests/tools/local_node/runtime/container_process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/polling.h"
#include "tests/support/temporary_directory.h"
#include "tests/tools/local_node/runtime/command_lookup.h"

namespace fulcrum::local_node {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> ShimCommand() {
  const char* binary_dir = std::getenv("FULCRUM_BINARY_DIR");
  return {std::string(binary_dir != nullptr ? binary_dir : "build") +
              "/tests/tools/local_node/fulcrum-local-node",
          "shim"};
}

bool WaitUntilEnded(ContainerProcess& process, std::chrono::seconds timeout = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (process.Running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  return !process.Running();
}

using fulcrum::testing::ReadFile;

class ContainerProcessTest : public ::testing::Test {
 protected:
  std::filesystem::path StateDir(const std::string& name) {
    std::filesystem::create_directories(temp_.path() / name);
    return temp_.path() / name;
  }
  ContainerSpec Shell(const std::string& script) {
    ContainerSpec spec;
    spec.argv = {"/bin/sh", "-c", script};
    spec.env = {"GREETING=hello"};
    spec.working_dir = temp_.path().string();
    spec.log_file = (temp_.path() / "out.log").string();
    return spec;
  }
  fulcrum::testing::TemporaryDirectory temp_{"container-process-test"};
};

TEST_F(ContainerProcessTest, RunsTheCommandWithItsEnvironmentAndRecordsTheExitCode) {
  auto process =
      ContainerProcess::Launch(ShimCommand(), StateDir("a"), Shell("echo $GREETING; pwd; exit 3"));
  ASSERT_TRUE(process.ok()) << process.error().ToString();
  ASSERT_TRUE(WaitUntilEnded(**process));
  const ContainerExit& exit = *(*process)->exit();
  EXPECT_EQ(exit.exit_code, 3);
  EXPECT_EQ(exit.reason, "Error");
  EXPECT_FALSE(exit.started_at.empty());
  EXPECT_FALSE(exit.finished_at.empty());
  EXPECT_EQ(ReadFile(temp_.path() / "out.log"), "hello\n" + temp_.path().string() + "\n");
}

TEST_F(ContainerProcessTest, FallbackToLogsOnErrorMakesTheLogsTailTheMessageOfAFailure) {
  ContainerSpec failing = Shell(
      "i=0; while [ $i -lt 100 ]; do echo line $i; i=$((i+1)); done; "
      "echo 'cannot start: bad dataset'; exit 2");
  failing.message_from_log_on_error = true;
  auto process = ContainerProcess::Launch(ShimCommand(), StateDir("tail"), failing);
  ASSERT_TRUE(process.ok()) << process.error().ToString();
  ASSERT_TRUE(WaitUntilEnded(**process));
  const std::string& message = (*process)->exit()->message;
  EXPECT_TRUE(message.ends_with("cannot start: bad dataset")) << message;
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 79) << "the last 80 lines";
  EXPECT_EQ(message.find("line 19\n"), std::string::npos) << message;

  ContainerSpec succeeding = Shell("echo fine; exit 0");
  succeeding.log_file = (temp_.path() / "fine.log").string();
  succeeding.message_from_log_on_error = true;
  auto fine = ContainerProcess::Launch(ShimCommand(), StateDir("fine"), succeeding);
  ASSERT_TRUE(fine.ok());
  ASSERT_TRUE(WaitUntilEnded(**fine));
  EXPECT_EQ((*fine)->exit()->message, "") << "only a failure takes the log";
}

TEST_F(ContainerProcessTest, AProgramThatCannotBeExecutedIsAStartErrorNamingIt) {
  ContainerSpec spec = Shell("");
  spec.argv = {"/nonexistent/program"};
  auto process = ContainerProcess::Launch(ShimCommand(), StateDir("b"), spec);
  ASSERT_TRUE(process.ok()) << process.error().ToString();
  ASSERT_TRUE(WaitUntilEnded(**process));
  EXPECT_EQ((*process)->exit()->reason, "StartError");
  EXPECT_EQ((*process)->exit()->exit_code, 128);
  EXPECT_NE((*process)->exit()->message.find("/nonexistent/program"), std::string::npos);
}

TEST_F(ContainerProcessTest, ASignalledContainerReportsOneHundredTwentyEightPlusTheSignal) {
  auto process = ContainerProcess::Launch(ShimCommand(), StateDir("c"), Shell("exec sleep 600"));
  ASSERT_TRUE(process.ok());
  EXPECT_TRUE((*process)->Running());
  (*process)->Signal(SIGTERM);
  ASSERT_TRUE(WaitUntilEnded(**process));
  EXPECT_EQ((*process)->exit()->signal, SIGTERM);
  EXPECT_EQ((*process)->exit()->exit_code, 128 + SIGTERM);
}

TEST_F(ContainerProcessTest, ALaterHandleAdoptsTheRunningContainerAndSeesItsEnd) {
  const auto dir = StateDir("d");
  pid_t container_pid = -1;
  {
    auto launched = ContainerProcess::Launch(
        ShimCommand(), dir, Shell("while [ ! -f go ]; do sleep 0.05; done; exit 5"));
    ASSERT_TRUE(launched.ok());
    container_pid = (*launched)->container_pid();
  }  // the first handle is gone, as with a killed agent; the container is not
  auto adopted = ContainerProcess::Adopt(dir);
  EXPECT_TRUE(adopted->Running());
  EXPECT_EQ(adopted->container_pid(), container_pid);
  std::ofstream(temp_.path() / "go") << "";
  ASSERT_TRUE(WaitUntilEnded(*adopted));
  EXPECT_EQ(adopted->exit()->exit_code, 5);
}

TEST_F(ContainerProcessTest, AShimKilledWithoutARecordEndsUnknownAndTakesItsContainerAlong) {
  const auto dir = StateDir("e");
  auto process = ContainerProcess::Launch(ShimCommand(), dir, Shell("exec sleep 600"));
  ASSERT_TRUE(process.ok());
  const pid_t container_pid = (*process)->container_pid();
  ::kill((*process)->shim_pid(), SIGKILL);
  ASSERT_TRUE(WaitUntilEnded(**process));
  EXPECT_EQ((*process)->exit()->reason, "ContainerStatusUnknown");
  EXPECT_EQ((*process)->exit()->exit_code, 137);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (::kill(container_pid, 0) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  EXPECT_NE(::kill(container_pid, 0), 0) << "the container dies with its shim (PR_SET_PDEATHSIG)";
}

TEST_F(ContainerProcessTest, LeftoverChildrenOfTheContainerAreKilledWhenItsMainProcessEnds) {
  auto process = ContainerProcess::Launch(ShimCommand(), StateDir("f"),
                                          Shell("sleep 600 & echo $! > child; exit 0"));
  ASSERT_TRUE(process.ok());
  ASSERT_TRUE(WaitUntilEnded(**process));
  int child = 0;
  std::istringstream(ReadFile(temp_.path() / "child")) >> child;
  ASSERT_GT(child, 0);
  EXPECT_NE(::kill(child, 0), 0) << "a background process of the container outlived it";
}

TEST(CommandLookup, TheImageNameIsTheEntrypointWithoutRegistryTagOrDigest) {
  EXPECT_EQ(ImageEntrypoint("localhost/fulcrum-trainer:0.1"), "fulcrum-trainer");
  EXPECT_EQ(ImageEntrypoint("registry:5000/team/fulcrum-operator@sha256:abc"), "fulcrum-operator");
  EXPECT_EQ(ImageEntrypoint("busybox"), "busybox");
}

TEST(CommandLookup, SearchFoldersComeBeforePathAndAMissingProgramIsNamed) {
  fulcrum::testing::TemporaryDirectory dir("command-lookup");
  const auto program = dir.path() / "sh";
  std::ofstream(program) << "#!/bin/sh\n";
  std::filesystem::permissions(program, std::filesystem::perms::owner_all);
  EXPECT_EQ(*FindProgram("sh", {dir.path()}, "/bin:/usr/bin"), program);
  EXPECT_EQ(FindProgram("sh", {}, "/bin:/usr/bin")->parent_path().filename(), "bin");
  auto missing = FindProgram("no-such-program", {dir.path()}, "/bin");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("no-such-program"), std::string::npos);
  EXPECT_NE(missing.error().message.find(dir.path().string()), std::string::npos);
}

}  // namespace
}  // namespace fulcrum::local_node
