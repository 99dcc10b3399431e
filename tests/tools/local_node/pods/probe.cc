#include "tests/tools/local_node/pods/probe.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstring>

#include "tests/tools/local_node/podspec/json_fields.h"
#include "tests/tools/local_node/runtime/command_lookup.h"
#include "tests/tools/local_node/runtime/pidfd.h"

namespace fulcrum::local_node {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

int IntField(const nlohmann::json& json, const char* key, int fallback) {
  const auto found = json.find(key);
  return found != json.end() && found->is_number_integer() && found->get<int>() > 0
             ? found->get<int>()
             : fallback;
}

std::chrono::seconds TimeoutOf(const nlohmann::json& probe) {
  return std::chrono::seconds(IntField(probe, "timeoutSeconds", 1));
}

// A port given by number, or by the name of one of the container's ports.
int ResolvePort(const nlohmann::json& port, const nlohmann::json& container) {
  if (port.is_number_integer()) return port.get<int>();
  if (!port.is_string()) return -1;
  const std::string name = port.get<std::string>();
  for (const auto& declared : ArrayMember(container, "ports")) {
    if (StringMember(declared, "name") == name)
      return static_cast<int>(IntegerMember(declared, "containerPort").value_or(-1));
  }
  return std::atoi(name.c_str()) > 0 ? std::atoi(name.c_str()) : -1;
}

ProbeOutcome ExecProbe(const nlohmann::json& exec, std::chrono::seconds timeout,
                       const ProbeContext& context) {
  std::vector<std::string> argv;
  for (const auto& arg : ArrayMember(exec, "command")) {
    if (arg.is_string()) argv.push_back(arg.get<std::string>());
  }
  if (argv.empty()) return {false, "exec probe has no command"};
  auto program = FindProgram(argv[0], context.search_dirs, context.path_variable);
  if (!program.ok()) return {false, program.error().message};
  argv[0] = program->string();
  std::vector<std::string> env = context.env;
  std::vector<char*> argv_pointers, env_pointers;
  for (auto& arg : argv) argv_pointers.push_back(arg.data());
  argv_pointers.push_back(nullptr);
  for (auto& var : env) env_pointers.push_back(var.data());
  env_pointers.push_back(nullptr);
  const std::string ns_path = "/proc/" + std::to_string(context.shim_pid) + "/ns/mnt";
  const int ns_fd = ::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns_fd < 0)
    return {false, "the container is gone (" + ns_path + ": " + std::strerror(errno) + ")"};
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const std::string working_dir = context.working_dir;

  const pid_t child = ::fork();
  if (child == 0) {  // async-signal-safe calls only until exec (the agent is multithreaded)
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (::setns(ns_fd, CLONE_NEWNS) != 0) ::_exit(126);
    ::dup2(null_fd, 0);
    ::dup2(null_fd, 1);
    ::dup2(null_fd, 2);
    if (!working_dir.empty() && ::chdir(working_dir.c_str()) != 0) ::_exit(126);
    ::execve(argv_pointers[0], argv_pointers.data(), env_pointers.data());
    ::_exit(127);
  }
  ::close(ns_fd);
  ::close(null_fd);
  if (child < 0) return {false, std::string("fork: ") + std::strerror(errno)};
  const int pidfd = PidfdOpen(child);
  pollfd done{pidfd, POLLIN, 0};
  const bool finished =
      pidfd >= 0 && ::poll(&done, 1, static_cast<int>(timeout.count() * 1000)) == 1;
  if (!finished) ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (pidfd >= 0) ::close(pidfd);
  if (!finished) return {false, "command timed out after " + std::to_string(timeout.count()) + "s"};
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {true, ""};
  return {false,
          "command exited with " +
              std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status))};
}

ProbeOutcome NetworkProbe(const nlohmann::json& action, bool http_get, std::chrono::seconds timeout,
                          const ProbeContext& context) {
  const nlohmann::json* port_field = Member(action, "port");
  const int port = port_field != nullptr ? ResolvePort(*port_field, context.container) : -1;
  if (port <= 0 || port > 65535)
    return {false, "probe port is not a port number or a named container port"};
  std::string host = StringMember(action, "host");
  if (host.empty()) host = context.pod_ip;
  if (http_get && !StringMember(action, "scheme").empty() &&
      StringMember(action, "scheme") != "HTTP") {
    return {false, "httpGet probes with scheme HTTPS are not supported by fulcrum-local-node"};
  }
  asio::io_context io;
  beast::tcp_stream stream(io);
  ProbeOutcome outcome{false, "timed out after " + std::to_string(timeout.count()) + "s"};
  http::request<http::empty_body> request;
  http::response<http::string_body> response;
  beast::flat_buffer buffer;
  boost::system::error_code parse_error;
  const tcp::endpoint endpoint(asio::ip::make_address(host, parse_error),
                               static_cast<unsigned short>(port));
  if (parse_error) return {false, "probe host '" + host + "' is not an IP address"};
  stream.async_connect(endpoint, [&](beast::error_code error) {
    if (error) {
      outcome = {false, "connect to " + host + ":" + std::to_string(port) + ": " + error.message()};
      return;
    }
    if (!http_get) {
      outcome = {true, ""};
      return;
    }
    const std::string path = StringMember(action, "path");
    request = http::request<http::empty_body>(http::verb::get, path.empty() ? "/" : path, 11);
    request.set(http::field::host, host + ":" + std::to_string(port));
    request.set(http::field::user_agent, "kube-probe/1.34");
    for (const auto& header : ArrayMember(action, "httpHeaders")) {
      request.set(StringMember(header, "name"), StringMember(header, "value"));
    }
    http::async_write(stream, request, [&](beast::error_code write_error, std::size_t) {
      if (write_error) {
        outcome = {false, "sending the request: " + write_error.message()};
        return;
      }
      http::async_read(stream, buffer, response, [&](beast::error_code read_error, std::size_t) {
        if (read_error) {
          outcome = {false, "reading the response: " + read_error.message()};
          return;
        }
        const unsigned code = response.result_int();
        outcome = {code >= 200 && code < 400,
                   "HTTP probe failed with statuscode: " + std::to_string(code)};
      });
    });
  });
  io.run_for(timeout);
  return outcome;
}

}  // namespace

ProbeOutcome RunProbe(const nlohmann::json& probe, const ProbeContext& context) {
  const std::chrono::seconds timeout = TimeoutOf(probe);
  if (probe.contains("exec")) return ExecProbe(probe["exec"], timeout, context);
  if (probe.contains("httpGet")) return NetworkProbe(probe["httpGet"], true, timeout, context);
  if (probe.contains("tcpSocket")) return NetworkProbe(probe["tcpSocket"], false, timeout, context);
  return {false, "probe has no exec, httpGet or tcpSocket handler (grpc probes are not supported)"};
}

ReadinessSchedule::ReadinessSchedule(const nlohmann::json& probe,
                                     Clock::time_point container_started)
    : period_(IntField(probe, "periodSeconds", 10)),
      success_threshold_(IntField(probe, "successThreshold", 1)),
      failure_threshold_(IntField(probe, "failureThreshold", 3)),
      next_(container_started + std::chrono::seconds(IntField(probe, "initialDelaySeconds", 0))) {}

void ReadinessSchedule::Record(bool success, Clock::time_point now) {
  next_ = now + period_;
  if (success) {
    failures_ = 0;
    if (++successes_ >= success_threshold_) ready_ = true;
  } else {
    successes_ = 0;
    if (++failures_ >= failure_threshold_) ready_ = false;
  }
}

}  // namespace fulcrum::local_node
