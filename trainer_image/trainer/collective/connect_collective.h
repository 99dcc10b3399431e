// One generation's collective, by kind: Gloo over the CPU (every build) or NCCL over CUDA
// devices (the CUDA build). Both rendezvous through the same c10d store under the same prefix.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "trainer_image/trainer/collective/collective.h"

namespace fulcrum::trainer {

enum class CollectiveKind { kAuto, kGloo, kNccl };  // auto: nccl on cuda, gloo on the CPU

// `kind` is resolved (gloo or nccl, never auto); `device_index` is the CUDA device for NCCL.
Result<std::unique_ptr<Collective>> ConnectCollective(CollectiveKind kind,
                                                      const std::string& rendezvous_address,
                                                      const std::string& prefix,
                                                      const CollectiveOptions& options,
                                                      int device_index);

}  // namespace fulcrum::trainer
