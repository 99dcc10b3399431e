// NCCL implementation of the collective interface, for trainers on NVIDIA GPUs. Compiled only
// with FULCRUM_WITH_CUDA; the Gloo twin (gloo_collective.h) is what the tests exercise.
// Host spans are staged through a device buffer; a collective that does not finish within
// the timeout aborts the communicator, so a dead peer is an error, not a hang.
#pragma once

#include <memory>

#include "common/result.h"
#include "trainer_image/trainer/collective/collective.h"
#include "trainer_image/trainer/collective/rendezvous_store.h"

namespace fulcrum::trainer {

// Rank 0 publishes an ncclUniqueId in `store`; the others read it and join.
Result<std::unique_ptr<Collective>> ConnectNccl(RendezvousStore& store,
                                                const CollectiveOptions& options, int device);

}  // namespace fulcrum::trainer
