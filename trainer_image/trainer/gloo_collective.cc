#include "trainer_image/trainer/gloo_collective.h"

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

// Abort needs the pairs of the gloo contexts, so it is built only against the system libgloo
// that Debian's libtorch links (CMake defines FULCRUM_GLOO_ABORT; see CMakeLists.txt).
#if FULCRUM_GLOO_ABORT
#include <dirent.h>
#include <gloo/context.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#endif

namespace fulcrum::trainer {
namespace {

#if FULCRUM_GLOO_ABORT
// A TCP endpoint, to compare a socket's own end with a Gloo pair's address.
struct Endpoint {
  int family = AF_UNSPEC;
  std::array<unsigned char, 16> host{};
  uint16_t port = 0;
  bool operator==(const Endpoint&) const = default;
};

std::optional<Endpoint> ToEndpoint(const sockaddr_storage& address) {
  Endpoint endpoint;
  endpoint.family = address.ss_family;
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    std::memcpy(endpoint.host.data(), &v4->sin_addr, sizeof(v4->sin_addr));
    endpoint.port = v4->sin_port;
  } else if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    std::memcpy(endpoint.host.data(), &v6->sin6_addr, sizeof(v6->sin6_addr));
    endpoint.port = v6->sin6_port;
  } else {
    return std::nullopt;
  }
  return endpoint;
}

// Gloo's TCP address serialises as the socket's sockaddr_storage (newer Gloo appends more).
std::optional<Endpoint> PairEndpoint(const gloo::transport::Pair& pair) {
  const std::vector<char> bytes = pair.address().bytes();
  if (bytes.size() < sizeof(sockaddr_storage)) return std::nullopt;
  sockaddr_storage address{};
  std::memcpy(&address, bytes.data(), sizeof(address));
  return ToEndpoint(address);
}

// Shuts down (both ways) this process's connected sockets whose own end is one of
// `endpoints`. Gloo keeps a pair's socket to itself, but a pair's public address is its
// socket's own end. A shut-down socket reads as the peer closing it, which Gloo handles on its
// own thread as it always does: every send and receive pending on the pair fails, and so do
// the peer's reads. Returns how many sockets were shut down.
int ShutDownSockets(const std::vector<Endpoint>& endpoints) {
  int shut = 0;
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return 0;
  while (const dirent* entry = readdir(fds)) {
    char* end = nullptr;
    const long number = std::strtol(entry->d_name, &end, 10);
    const int fd = static_cast<int>(number);
    struct stat info {};
    if (end == entry->d_name || *end != '\0' || fd == dirfd(fds) || fstat(fd, &info) != 0 ||
        !S_ISSOCK(info.st_mode)) {
      continue;
    }
    sockaddr_storage own{};
    sockaddr_storage peer{};
    socklen_t own_length = sizeof(own);
    socklen_t peer_length = sizeof(peer);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&own), &own_length) != 0) {
      continue;  // listening or not connected: no collective runs over it
    }
    const std::optional<Endpoint> endpoint = ToEndpoint(own);
    if (endpoint && std::find(endpoints.begin(), endpoints.end(), *endpoint) != endpoints.end() &&
        shutdown(fd, SHUT_RDWR) == 0) {
      ++shut;
    }
  }
  closedir(fds);
  return shut;
}
#endif

// c10d 1.13 has no abort for Gloo; its gloo contexts are protected members, which a subclass
// may reach. Aborting shuts down the sockets of every pair of every context: the operation in
// flight fails at once (so ~ProcessGroupGloo does not wait for it), later ones fail before
// they start, and the peers' operations with this rank fail too.
class AbortableProcessGroupGloo final : public c10d::ProcessGroupGloo {
 public:
  using c10d::ProcessGroupGloo::ProcessGroupGloo;

  bool Abort() {
#if FULCRUM_GLOO_ABORT
    std::vector<Endpoint> endpoints;
    for (const std::shared_ptr<gloo::Context>& context : contexts_) {
      for (int peer = 0; peer < context->size; ++peer) {
        if (peer == context->rank) continue;
        if (const std::unique_ptr<gloo::transport::Pair>& pair = context->getPair(peer)) {
          if (std::optional<Endpoint> endpoint = PairEndpoint(*pair))
            endpoints.push_back(*endpoint);
        }
      }
    }
    return ShutDownSockets(endpoints) > 0;
#else
    return false;
#endif
  }
};

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

// One c10d work item, waited for with the collective timeout.
class GlooPending final : public PendingCollective {
 public:
  GlooPending(c10::intrusive_ptr<c10d::Work> work, std::vector<at::Tensor> tensors,
              std::chrono::milliseconds timeout)
      : work_(std::move(work)), tensors_(std::move(tensors)), timeout_(timeout) {}
  ~GlooPending() override {
    if (work_) static_cast<void>(Wait());
  }
  Status Wait() override {
    if (!work_) return MakeError(ErrorCode::kFailedPrecondition, "already waited for");
    c10::intrusive_ptr<c10d::Work> work = std::move(work_);
    try {
      if (!work->wait(timeout_))
        return MakeError(ErrorCode::kDeadlineExceeded, "all-reduce timed out");
      return Ok();
    } catch (const std::exception& error) {
      return MakeError(ErrorCode::kUnavailable, std::string("all-reduce failed: ") + error.what());
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::vector<at::Tensor> tensors_;  // the work refers to them until it completes
  std::chrono::milliseconds timeout_;
};

class GlooCollective final : public Collective {
 public:
  GlooCollective(c10::intrusive_ptr<AbortableProcessGroupGloo> group, CollectiveOptions options)
      : group_(std::move(group)), options_(std::move(options)) {}
  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }

  Status AllReduceSum(std::span<float> values) override {
    return AllReduce(
        torch::from_blob(values.data(), {static_cast<int64_t>(values.size())}, torch::kFloat32));
  }
  Result<std::unique_ptr<PendingCollective>> StartAllReduceSum(std::span<float> values) override {
    std::vector<at::Tensor> tensors = {
        torch::from_blob(values.data(), {static_cast<int64_t>(values.size())}, torch::kFloat32)};
    try {
      c10::intrusive_ptr<c10d::Work> work = group_->allreduce(tensors);
      return std::unique_ptr<PendingCollective>(
          std::make_unique<GlooPending>(std::move(work), std::move(tensors), options_.timeout));
    } catch (const std::exception& error) {
      return MakeError(ErrorCode::kUnavailable, std::string("all-reduce failed: ") + error.what());
    }
  }
  Result<std::unique_ptr<PendingCollective>> StartAllReduceSumOnDevice(std::span<float>,
                                                                       void*) override {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "Gloo reduces host memory: stage GPU values through the host");
  }
  Status AllReduceSum(std::span<double> values) override {
    return AllReduce(
        torch::from_blob(values.data(), {static_cast<int64_t>(values.size())}, torch::kFloat64));
  }
  Status Broadcast(std::span<std::byte> bytes, int root) override {
    std::vector<at::Tensor> tensors = {
        torch::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, torch::kUInt8)};
    c10d::BroadcastOptions broadcast;
    broadcast.rootRank = root;
    return Run([&] { return group_->broadcast(tensors, broadcast); }, "broadcast");
  }
  bool Abort(const std::string&) override { return group_->Abort(); }

 private:
  Status AllReduce(at::Tensor tensor) {
    std::vector<at::Tensor> tensors = {std::move(tensor)};
    return Run([&] { return group_->allreduce(tensors); }, "all-reduce");
  }
  // A dead or stuck peer surfaces as an exception or a timeout: either way the step failed.
  template <typename Start>
  Status Run(Start start, const char* what) {
    try {
      c10::intrusive_ptr<c10d::Work> work = start();
      if (!work->wait(options_.timeout)) {
        return MakeError(ErrorCode::kDeadlineExceeded, std::string(what) + " timed out");
      }
      return Ok();
    } catch (const std::exception& error) {
      return MakeError(ErrorCode::kUnavailable, std::string(what) + " failed: " + error.what());
    }
  }

  c10::intrusive_ptr<AbortableProcessGroupGloo> group_;
  CollectiveOptions options_;
};

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

// The generation's store: the TCPStore at the rendezvous address, under the generation prefix.
c10::intrusive_ptr<c10d::Store> ConnectPrefixedStore(const std::pair<std::string, int>& address,
                                                     const std::string& prefix,
                                                     std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(address.second);
  store_options.isServer = false;
  store_options.waitWorkers = false;
  store_options.timeout = timeout;
  auto tcp = c10::make_intrusive<c10d::TCPStore>(address.first, store_options);
  return c10::make_intrusive<c10d::PrefixStore>(prefix, tcp);
}

}  // namespace

Result<std::unique_ptr<RendezvousStore>> ConnectRendezvousStore(
    const std::string& rendezvous_address, const std::string& prefix,
    std::chrono::milliseconds timeout) {
  Result<std::pair<std::string, int>> address = SplitAddress(rendezvous_address);
  if (!address.ok()) return address.error();
  try {
    return std::unique_ptr<RendezvousStore>(
        std::make_unique<C10dRendezvousStore>(ConnectPrefixedStore(*address, prefix, timeout)));
  } catch (const std::exception& error) {
    return MakeError(ErrorCode::kUnavailable,
                     "cannot reach the store at " + rendezvous_address + ": " + error.what());
  }
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

Result<std::unique_ptr<Collective>> ConnectGloo(const std::string& rendezvous_address,
                                                const std::string& prefix,
                                                const CollectiveOptions& options) {
  Result<std::pair<std::string, int>> address = SplitAddress(rendezvous_address);
  if (!address.ok()) return address.error();
  try {
    auto store = ConnectPrefixedStore(*address, prefix, options.timeout);
    auto group_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
    group_options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(options.interface_host));
    group_options->threads = 1;
    auto group = c10::make_intrusive<AbortableProcessGroupGloo>(store, options.rank,
                                                                options.world_size, group_options);
    return std::unique_ptr<Collective>(std::make_unique<GlooCollective>(std::move(group), options));
  } catch (const std::exception& error) {
    return MakeError(ErrorCode::kUnavailable, "cannot form the Gloo group at " +
                                                  rendezvous_address + " (" + prefix +
                                                  "): " + error.what());
  }
}

}  // namespace fulcrum::trainer
