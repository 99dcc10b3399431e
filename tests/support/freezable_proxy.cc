#include "tests/support/freezable_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

namespace fulcrum::testing {

using namespace std::chrono_literals;

FreezableProxy::FreezableProxy(int target_port) : target_port_(target_port) {
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ::bind(listener_, reinterpret_cast<sockaddr*>(&address), length);
  ::listen(listener_, 16);
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  acceptor_ = std::jthread([this](std::stop_token stop) { Accept(stop); });
}

FreezableProxy::~FreezableProxy() {
  acceptor_.request_stop();
  acceptor_.join();
  for (auto& pump : pumps_) pump.request_stop();
  pumps_.clear();
  ::close(listener_);
}

void FreezableProxy::Accept(std::stop_token stop) {
  while (!stop.stop_requested()) {
    pollfd ready{listener_, POLLIN, 0};
    if (::poll(&ready, 1, 50) != 1) continue;
    const int client = ::accept(listener_, nullptr, nullptr);
    const int server = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in target{};
    target.sin_family = AF_INET;
    target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    target.sin_port = htons(static_cast<uint16_t>(target_port_));
    ::connect(server, reinterpret_cast<sockaddr*>(&target), sizeof target);
    const int index = accepted_++;
    pumps_.emplace_back([this, client, server, index](std::stop_token pump_stop) {
      Pump(pump_stop, client, server, index);
    });
  }
}

void FreezableProxy::Pump(std::stop_token stop, int client, int server, int index) {
  char buffer[16384];
  while (!stop.stop_requested()) {
    if (index < frozen_below_) {  // frozen: hold the sockets, move nothing
      std::this_thread::sleep_for(20ms);
      continue;
    }
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    if (::poll(fds, 2, 20) <= 0) continue;
    bool closed = false;
    for (int side = 0; side < 2; ++side) {
      if (!(fds[side].revents & (POLLIN | POLLHUP))) continue;
      const ssize_t got = ::read(fds[side].fd, buffer, sizeof buffer);
      if (got <= 0 || ::write(fds[1 - side].fd, buffer, static_cast<size_t>(got)) != got)
        closed = true;
    }
    if (closed) break;
  }
  ::close(client);
  ::close(server);
}

}  // namespace fulcrum::testing
