#include "trainer_image/trainer/collective/rendezvous_store.h"

#include <torch/torch.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "trainer_image/trainer/collective/c10d_store.h"

namespace fulcrum::trainer {
namespace {

Result<std::pair<std::string, int>> SplitAddress(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos)
    return InvalidArgument("rendezvous_address", "expected host:port");
  try {
    const int port = std::stoi(address.substr(colon + 1));
    if (port <= 0 || port > 65535) throw std::out_of_range("port");
    return std::pair{address.substr(0, colon), port};
  } catch (const std::exception&) {
    return InvalidArgument("rendezvous_address", "\"" + address + "\" has no valid port");
  }
}
// The generation's c10d store as the torch-free RendezvousStore the NCCL backend uses.
class C10dRendezvousStore final : public RendezvousStore {
 public:
  explicit C10dRendezvousStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  Status Set(const std::string& key, const std::vector<std::byte>& value) override {
    try {
      const auto* data = reinterpret_cast<const uint8_t*>(value.data());
      store_->set(key, std::vector<uint8_t>(data, data + value.size()));
      return Ok();
    } catch (const std::exception& error) {
      return MakeError(ErrorCode::kUnavailable, "store set " + key + ": " + error.what());
    }
  }
  Result<std::vector<std::byte>> Get(const std::string& key) override {
    try {
      const std::vector<uint8_t> value = store_->get(key);
      const auto* data = reinterpret_cast<const std::byte*>(value.data());
      return std::vector<std::byte>(data, data + value.size());
    } catch (const std::exception& error) {
      return MakeError(ErrorCode::kUnavailable, "store get " + key + ": " + error.what());
    }
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace

Result<c10::intrusive_ptr<c10d::Store>> ConnectC10dStore(const std::string& rendezvous_address,
                                                         const std::string& prefix,
                                                         std::chrono::milliseconds timeout) {
  Result<std::pair<std::string, int>> address = SplitAddress(rendezvous_address);
  if (!address.ok()) return address.error();
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<std::uint16_t>(address->second);
    store_options.isServer = false;
    store_options.waitWorkers = false;
    store_options.timeout = timeout;
    auto tcp = c10::make_intrusive<c10d::TCPStore>(address->first, store_options);
    return c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::PrefixStore>(prefix, tcp));
  } catch (const std::exception& error) {
    return MakeError(ErrorCode::kUnavailable,
                     "cannot reach the store at " + rendezvous_address + ": " + error.what());
  }
}

Result<std::unique_ptr<RendezvousStore>> ConnectRendezvousStore(
    const std::string& rendezvous_address, const std::string& prefix,
    std::chrono::milliseconds timeout) {
  Result<c10::intrusive_ptr<c10d::Store>> store =
      ConnectC10dStore(rendezvous_address, prefix, timeout);
  if (!store.ok()) return store.error();
  return std::unique_ptr<RendezvousStore>(std::make_unique<C10dRendezvousStore>(*store));
}

struct StoreServer::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

StoreServer::StoreServer(std::unique_ptr<Impl> impl, std::string address)
    : impl_(std::move(impl)), address_(std::move(address)) {}
StoreServer::~StoreServer() = default;

Result<std::unique_ptr<StoreServer>> StoreServer::Start(const std::string& host, int port) {
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(port);
    options.isServer = true;
    options.waitWorkers = false;
    auto impl = std::make_unique<Impl>();
    impl->store = c10::make_intrusive<c10d::TCPStore>(host, options);
    const std::string address = host + ":" + std::to_string(impl->store->getPort());
    return std::unique_ptr<StoreServer>(new StoreServer(std::move(impl), address));
  } catch (const std::exception& error) {
    return InvalidArgument("--host", "cannot serve a TCPStore on " + host + ":" +
                                         std::to_string(port) + ": " + error.what());
  }
}

}  // namespace fulcrum::trainer
