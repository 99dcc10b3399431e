// The generation's c10d store for backends that take one (Gloo's process group): the TCPStore
// at the rendezvous address under the generation's prefix. Includes torch.
#pragma once

#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "common/result.h"

namespace fulcrum::trainer {

// `rendezvous_address` is "host:port"; Get waits up to `timeout` for a key.
Result<c10::intrusive_ptr<c10d::Store>> ConnectC10dStore(const std::string& rendezvous_address,
                                                         const std::string& prefix,
                                                         std::chrono::milliseconds timeout);

}  // namespace fulcrum::trainer
