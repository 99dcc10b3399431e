// A TCP forwarder on loopback for tests of vanished peers.
#pragma once

#include <atomic>
#include <stop_token>
#include <thread>
#include <vector>

namespace fulcrum::testing {

// A TCP forwarder on loopback whose connections can be frozen: bytes stop flowing both ways
// but nothing is closed, as when a peer's host vanishes (no FIN, no RST). New connections
// forward normally.
class FreezableProxy {
 public:
  explicit FreezableProxy(int target_port);
  ~FreezableProxy();
  FreezableProxy(const FreezableProxy&) = delete;
  FreezableProxy& operator=(const FreezableProxy&) = delete;
  int port() const { return port_; }
  // Every connection open now stops forwarding.
  void FreezeOpenConnections() { frozen_below_ = accepted_.load(); }

 private:
  void Accept(std::stop_token stop);
  void Pump(std::stop_token stop, int client, int server, int index);

  int target_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_ = 0;
  std::atomic<int> frozen_below_ = 0;
  std::vector<std::jthread> pumps_;  // touched by the acceptor thread, then by the destructor
  std::jthread acceptor_;
};

}  // namespace fulcrum::testing
