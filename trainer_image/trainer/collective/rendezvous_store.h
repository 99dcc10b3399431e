// The rendezvous store: a c10d TCPStore every trainer serves for as long as it lives, and
// clients of it under one generation's prefix. Gloo and NCCL both rendezvous through it.
// Torch-free header; the c10d types stay in the .cc (and c10d_store.h for the backends).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace fulcrum::trainer {

// Blocking key-value store shared by the members of one generation (the c10d TCPStore of
// rank 0 under the generation's prefix). Backends use it to exchange connection details.
class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;
  virtual Status Set(const std::string& key, const std::vector<std::byte>& value) = 0;
  virtual Result<std::vector<std::byte>> Get(const std::string& key) = 0;  // waits for the key
};

// A c10d TCPStore server this trainer hosts for as long as it lives; when it is rank 0 of a
// generation, the coordinator hands its address to the others as the rendezvous.
class StoreServer {
 public:
  static Result<std::unique_ptr<StoreServer>> Start(const std::string& host, int port);
  ~StoreServer();
  const std::string& address() const { return address_; }

 private:
  struct Impl;
  explicit StoreServer(std::unique_ptr<Impl> impl, std::string address);
  std::unique_ptr<Impl> impl_;
  std::string address_;
};

// A client of the store at `rendezvous_address` under `prefix`, for backends that exchange
// their own connection details (NCCL's unique id). Get waits up to `timeout` for a key.
Result<std::unique_ptr<RendezvousStore>> ConnectRendezvousStore(
    const std::string& rendezvous_address, const std::string& prefix,
    std::chrono::milliseconds timeout);

}  // namespace fulcrum::trainer
