#include "trainer_image/trainer/collective/gloo_collective.h"

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "common/log.h"
#include "trainer_image/trainer/collective/c10d_store.h"

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

// This process's connected sockets whose own end is one of `endpoints`, as file descriptors.
// Gloo keeps a pair's socket to itself, but once connected a pair's public address is its
// socket's own end, and Gloo closes the socket when the pair fails.
std::vector<int> SocketsOf(const std::vector<Endpoint>& endpoints) {
  std::vector<int> sockets;
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return sockets;
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
    if (endpoint && std::find(endpoints.begin(), endpoints.end(), *endpoint) != endpoints.end())
      sockets.push_back(fd);
  }
  closedir(fds);
  return sockets;
}
#endif

// c10d 1.13 has no abort for Gloo; its gloo contexts are protected members, which a subclass
// may reach. Aborting shuts down the sockets of every pair of every context: the operation in
// flight fails at once (so ~ProcessGroupGloo does not wait for it), later ones fail before
// they start, and the peers' operations with this rank fail too.
class AbortableProcessGroupGloo final : public c10d::ProcessGroupGloo {
 public:
  using c10d::ProcessGroupGloo::ProcessGroupGloo;

  // A shut-down socket reads as the peer closing it, which Gloo handles on its own thread as it
  // always does: every send and receive pending on the pair fails, and so do the peer's reads.
  bool Abort() {
#if FULCRUM_GLOO_ABORT
    int shut = 0;
    for (int fd : SocketsOf(PairEndpoints())) shut += shutdown(fd, SHUT_RDWR) == 0 ? 1 : 0;
    return shut > 0;
#else
    return false;
#endif
  }

  // True when a pair of this group has closed its socket: Gloo closes a pair's socket when the
  // pair fails (its peer closed, reset or aborted it), so no collective of the group can ever
  // complete again. Gloo fails most operations on the pair as it closes it, but not a send it
  // had already handed to the socket and saw fail (EPIPE or ECONNRESET: it keeps those to
  // retry and never fails them), so such a collective would wait out its whole timeout.
  bool LostAPair() {
#if FULCRUM_GLOO_ABORT
    const std::vector<Endpoint> endpoints = PairEndpoints();
    return SocketsOf(endpoints).size() < endpoints.size();
#else
    return false;
#endif
  }

 private:
#if FULCRUM_GLOO_ABORT
  std::vector<Endpoint> PairEndpoints() {
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
    return endpoints;
  }
#endif
};

// What a group's waits share: whether it was aborted, and whether a work item was given up on
// while Gloo still ran it (then destroying the group would block on it: see ~GlooCollective).
struct GroupState {
  c10::intrusive_ptr<AbortableProcessGroupGloo> group;
  std::mutex mutex;
  std::condition_variable changed;  // a work item completed
  bool aborted = false;
  bool abandoned_work = false;
};

// How often a wait that lasts checks that the group's pairs are still connected. Only waits
// longer than this pay for the check (a scan of /proc/self/fd).
constexpr auto kPairCheckPeriod = std::chrono::seconds(1);

// Waits for `work` until it completes, `timeout` passes or a pair of the group is lost (checked
// every kPairCheckPeriod while the wait lasts). In the last two cases the work may
// still be running in Gloo, which can then no longer move data (every pair is closed or shut
// down), so the caller's memory is left alone.
Status WaitForWork(const c10::intrusive_ptr<c10d::Work>& work,
                   const std::shared_ptr<GroupState>& state, std::chrono::milliseconds timeout,
                   const std::string& what) {
  try {
    const c10::intrusive_ptr<c10::ivalue::Future> future = work->getFuture();
    // The future completes (value or error) before the work itself is marked done. The callback
    // owns the state: it may run after an abandoned wait returned.
    future->addCallback([state](c10::ivalue::Future&) {
      std::lock_guard lock(state->mutex);
      state->changed.notify_all();
    });
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock lock(state->mutex);
    // Gloo fails an operation on a lost pair as it closes the pair's socket, a moment after: a
    // work item is given up only if it is still running a whole period after the loss was seen.
    bool lost_seen = false;
    while (!future->completed()) {
      // A pending all-reduce can outlive its collective (the gradient buckets drop theirs at
      // the next step): once ~GlooCollective gave the group up, nothing is left to wait for.
      if (!state->group) {
        return MakeError(ErrorCode::kUnavailable, what + " failed: its group was given up");
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        state->abandoned_work = true;
        return MakeError(ErrorCode::kDeadlineExceeded, what + " timed out");
      }
      if (state->changed.wait_until(lock, std::min(deadline, now + kPairCheckPeriod)) ==
              std::cv_status::no_timeout ||
          future->completed() || !state->group->LostAPair()) {
        continue;
      }
      if (!lost_seen) {
        lost_seen = true;
        continue;
      }
      state->aborted = true;
      state->abandoned_work = true;
      lock.unlock();
      state->group->Abort();  // fail the peers' side too, as an Abort does
      return MakeError(ErrorCode::kUnavailable,
                       what + " failed: a connection of the group closed under it");
    }
    lock.unlock();
    work->wait(timeout);  // returns at once; rethrows the work's error, if any
    return Ok();
  } catch (const std::exception& error) {
    return MakeError(ErrorCode::kUnavailable, what + " failed: " + error.what());
  }
}

// One c10d work item, waited for with the collective timeout.
class GlooPending final : public PendingCollective {
 public:
  GlooPending(c10::intrusive_ptr<c10d::Work> work, std::vector<at::Tensor> tensors,
              std::shared_ptr<GroupState> state, std::chrono::milliseconds timeout)
      : work_(std::move(work)),
        tensors_(std::move(tensors)),
        state_(std::move(state)),
        timeout_(timeout) {}
  ~GlooPending() override {
    if (work_) static_cast<void>(Wait());
  }
  Status Wait() override {
    if (!work_) return MakeError(ErrorCode::kFailedPrecondition, "already waited for");
    c10::intrusive_ptr<c10d::Work> work = std::move(work_);
    return WaitForWork(work, state_, timeout_, "all-reduce");
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::vector<at::Tensor> tensors_;  // the work refers to them until it completes
  std::shared_ptr<GroupState> state_;
  std::chrono::milliseconds timeout_;
};

class GlooCollective final : public Collective {
 public:
  GlooCollective(c10::intrusive_ptr<AbortableProcessGroupGloo> group, CollectiveOptions options)
      : state_(std::make_shared<GroupState>()), options_(std::move(options)) {
    state_->group = std::move(group);
  }
  ~GlooCollective() override {
    std::lock_guard lock(state_->mutex);
    if (state_->abandoned_work) {
      // ~ProcessGroupGloo waits for the work in flight, which Gloo may hold until the
      // collective timeout (a failed send it never fails): the group's threads and sockets
      // are given up instead, once per generation abandoned that way.
      log::Warn("trainer", "", "leaving a Gloo group with work in flight behind",
                {{"rank", options_.rank}, {"world_size", options_.world_size}});
      static_cast<void>(state_->group.release());
    }
  }
  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }

  Status AllReduceSum(std::span<float> values) override {
    return AllReduce(
        torch::from_blob(values.data(), {static_cast<int64_t>(values.size())}, torch::kFloat32));
  }
  Result<std::unique_ptr<PendingCollective>> StartAllReduceSum(std::span<float> values) override {
    if (Status status = CheckNotAborted("all-reduce"); !status.ok()) return status.error();
    std::vector<at::Tensor> tensors = {
        torch::from_blob(values.data(), {static_cast<int64_t>(values.size())}, torch::kFloat32)};
    try {
      c10::intrusive_ptr<c10d::Work> work = state_->group->allreduce(tensors);
      return std::unique_ptr<PendingCollective>(std::make_unique<GlooPending>(
          std::move(work), std::move(tensors), state_, options_.timeout));
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
    return Run([&] { return state_->group->broadcast(tensors, broadcast); }, "broadcast");
  }
  // Waits in flight end as Gloo fails their work (or as WaitForWork finds a pair lost).
  bool Abort(const std::string&) override {
    {
      std::lock_guard lock(state_->mutex);
      state_->aborted = true;  // later operations fail before they start
    }
    return state_->group->Abort();
  }

 private:
  Status AllReduce(at::Tensor tensor) {
    std::vector<at::Tensor> tensors = {std::move(tensor)};
    return Run([&] { return state_->group->allreduce(tensors); }, "all-reduce");
  }
  Status CheckNotAborted(const char* what) {
    std::lock_guard lock(state_->mutex);
    if (!state_->aborted) return Ok();
    return MakeError(ErrorCode::kUnavailable, std::string(what) + " failed: the group was aborted");
  }
  // A dead or stuck peer surfaces as an exception or a timeout: either way the step failed.
  template <typename Start>
  Status Run(Start start, const char* what) {
    if (Status status = CheckNotAborted(what); !status.ok()) return status;
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = start();
    } catch (const std::exception& error) {
      return MakeError(ErrorCode::kUnavailable, std::string(what) + " failed: " + error.what());
    }
    return WaitForWork(work, state_, options_.timeout, what);
  }

  std::shared_ptr<GroupState> state_;
  CollectiveOptions options_;
};

}  // namespace

Result<std::unique_ptr<Collective>> ConnectGloo(const std::string& rendezvous_address,
                                                const std::string& prefix,
                                                const CollectiveOptions& options) {
  Result<c10::intrusive_ptr<c10d::Store>> store =
      ConnectC10dStore(rendezvous_address, prefix, options.timeout);
  if (!store.ok()) return store.error();
  try {
    auto group_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
    group_options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(options.interface_host));
    group_options->threads = 1;
    auto group = c10::make_intrusive<AbortableProcessGroupGloo>(*store, options.rank,
                                                                options.world_size, group_options);
    return std::unique_ptr<Collective>(std::make_unique<GlooCollective>(std::move(group), options));
  } catch (const std::exception& error) {
    return MakeError(ErrorCode::kUnavailable, "cannot form the Gloo group at " +
                                                  rendezvous_address + " (" + prefix +
                                                  "): " + error.what());
  }
}

}  // namespace fulcrum::trainer
