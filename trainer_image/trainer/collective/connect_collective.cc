#include "trainer_image/trainer/collective/connect_collective.h"

#include "trainer_image/trainer/collective/gloo_collective.h"
#include "trainer_image/trainer/collective/rendezvous_store.h"
#if FULCRUM_TORCH_CUDA
#include "trainer_image/trainer/collective/nccl_collective.h"
#endif

namespace fulcrum::trainer {

Result<std::unique_ptr<Collective>> ConnectCollective(CollectiveKind kind,
                                                      const std::string& rendezvous_address,
                                                      const std::string& prefix,
                                                      const CollectiveOptions& options,
                                                      int device_index) {
  if (kind != CollectiveKind::kNccl) return ConnectGloo(rendezvous_address, prefix, options);
#if FULCRUM_TORCH_CUDA
  Result<std::unique_ptr<RendezvousStore>> store =
      ConnectRendezvousStore(rendezvous_address, prefix, options.timeout);
  if (!store.ok()) return store.error();
  return ConnectNccl(**store, options, device_index);
#else
  (void)device_index;
  return InvalidArgument("--collective", "nccl needs the CUDA build of fulcrum-trainer; use gloo");
#endif
}

}  // namespace fulcrum::trainer
