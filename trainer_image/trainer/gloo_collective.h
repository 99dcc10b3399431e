// Gloo through libtorch c10d on CPU: the rendezvous store every trainer serves, and the
// process group of one generation. Torch-free header; the c10d types stay in the .cc.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/result.h"
#include "trainer_image/trainer/collective.h"

namespace fulcrum::trainer {

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

// Connects to the store at `rendezvous_address` ("host:port") under `prefix` (a fresh prefix
// per generation, so keys of an aborted generation never mix in) and builds the Gloo group.
// The process must ignore SIGPIPE (main.cc does): Gloo writes to its pairs' sockets without
// MSG_NOSIGNAL, and a peer's Abort shuts those sockets down under a collective in flight.
Result<std::unique_ptr<Collective>> ConnectGloo(const std::string& rendezvous_address,
                                                const std::string& prefix,
                                                const CollectiveOptions& options);

}  // namespace fulcrum::trainer
