// Gloo through libtorch c10d on CPU: the process group of one generation. Torch-free header;
// the c10d types stay in the .cc.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "trainer_image/trainer/collective/collective.h"

namespace fulcrum::trainer {

// Connects to the store at `rendezvous_address` ("host:port") under `prefix` (a fresh prefix
// per generation, so keys of an aborted generation never mix in) and builds the Gloo group.
// The process must ignore SIGPIPE (main.cc does): Gloo writes to its pairs' sockets without
// MSG_NOSIGNAL, and a peer's Abort shuts those sockets down under a collective in flight.
Result<std::unique_ptr<Collective>> ConnectGloo(const std::string& rendezvous_address,
                                                const std::string& prefix,
                                                const CollectiveOptions& options);

}  // namespace fulcrum::trainer
