// HTTP servers on loopback for client behaviour that a real API server will not
// show on demand: scripted replies (429 with Retry-After, a watch the server
// ends at once) and a server that accepts a request and never answers (a list
// in flight). Include before cpprest-using headers' users: gtest first.
#pragma once

// gtest must come before cpprest, whose headers define a macro named U.
// clang-format off
#include <gtest/gtest.h>
#include <cpprest/http_listener.h>
// clang-format on

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace fulcrum::kube::testing {

// The API server's answer when it sheds load (429), as its body.
inline const std::string kTooManyRequestsStatus =
    R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"slow down","reason":"TooManyRequests","code":429})";

struct Reply {
  int status;
  std::string body;
  std::string retry_after;
};

// Answers each request with the next scripted reply (the last one repeats).
class ScriptedServer {
 public:
  explicit ScriptedServer(std::deque<Reply> replies) : replies_(std::move(replies)) {
    std::mt19937 random(std::random_device{}());
    for (int attempt = 0; attempt < 20 && !listener_; ++attempt) {
      port_ = std::uniform_int_distribution<int>(20000, 60000)(random);
      try {
        auto listener = std::make_unique<web::http::experimental::listener::http_listener>(
            "http://127.0.0.1:" + std::to_string(port_));
        listener->support([this](web::http::http_request request) { Answer(request); });
        listener->open().wait();
        listener_ = std::move(listener);
      } catch (const std::exception&) {
        // Port taken: try another.
      }
    }
  }
  ~ScriptedServer() {
    if (listener_) listener_->close().wait();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_; }
  bool ok() const { return listener_ != nullptr; }
  // The request paths with their queries, in order.
  std::vector<std::string> paths() const {
    std::lock_guard lock(mutex_);
    return paths_;
  }

 private:
  void Answer(web::http::http_request request) {
    Reply reply;
    {
      std::lock_guard lock(mutex_);
      ++requests_;
      paths_.push_back(request.request_uri().to_string());
      reply = replies_.front();
      if (replies_.size() > 1) replies_.pop_front();
    }
    web::http::http_response response(static_cast<web::http::status_code>(reply.status));
    if (!reply.retry_after.empty()) response.headers().add("Retry-After", reply.retry_after);
    response.set_body(reply.body, "application/json");
    request.reply(response).wait();
  }

  mutable std::mutex mutex_;
  std::deque<Reply> replies_;
  std::vector<std::string> paths_;
  std::atomic<int> requests_{0};
  int port_ = 0;
  std::unique_ptr<web::http::experimental::listener::http_listener> listener_;
};

// Accepts connections and reads what arrives, but never answers: a request to
// it stays in flight until the client gives up. Counts the connections the
// client closed, which is how a test sees that a request was abandoned.
class StallingServer {
 public:
  StallingServer() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof(address);
    if (listener_ < 0 || bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        listen(listener_, 16) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      return;
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::jthread([this](std::stop_token stop) { Serve(stop); });
  }
  ~StallingServer() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
    for (int fd : connections_) close(fd);
    if (listener_ >= 0) close(listener_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  bool ok() const { return port_ != 0; }
  int requests_received() const { return requests_; }
  int closed_by_client() const { return closed_by_client_; }

 private:
  void Serve(std::stop_token stop) {
    std::vector<bool> open;
    while (!stop.stop_requested()) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (std::size_t i = 0; i < connections_.size(); ++i) {
        if (open[i]) fds.push_back({connections_[i], POLLIN, 0});
      }
      if (poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        const int fd = accept(listener_, nullptr, nullptr);
        if (fd >= 0) {
          connections_.push_back(fd);
          open.push_back(true);
        }
      }
      for (std::size_t f = 1; f < fds.size(); ++f) {
        if (!(fds[f].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buffer[4096];
        const ssize_t got = read(fds[f].fd, buffer, sizeof(buffer));
        for (std::size_t i = 0; i < connections_.size(); ++i) {
          if (connections_[i] != fds[f].fd) continue;
          if (got <= 0) {
            open[i] = false;
            ++closed_by_client_;
          } else if (std::string_view(buffer, static_cast<std::size_t>(got)).find("HTTP/1.1") !=
                     std::string_view::npos) {
            ++requests_;
          }
        }
      }
    }
  }

  int listener_ = -1;
  int port_ = 0;
  std::vector<int> connections_;  // the serving thread's, then the destructor's
  std::atomic<int> requests_{0};
  std::atomic<int> closed_by_client_{0};
  std::jthread thread_;
};

}  // namespace fulcrum::kube::testing
