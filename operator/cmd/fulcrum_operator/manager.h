// fulcrum-operator's parts as runnables under one manager, as controller-runtime's manager runs
// its controllers, webhooks and servers: each part says whether it needs the lease. The parts
// that need none (caches, health and metrics servers) run from start to shutdown on every
// replica; those that need it (the coordinator server, its endpoint publisher, the job
// controller) run while this replica leads, start in the order added, and stop in reverse, so
// the controller stops before the coordinator server forgets its jobs. Unlike
// controller-runtime's, a replica that loses the lease campaigns again instead of exiting:
// its caches stay warm and it needs no supervisor.
#pragma once

#include <functional>
#include <stop_token>
#include <string>
#include <vector>

#include "common/result.h"

namespace fulcrum::operator_main {

struct Runnable {
  std::string name;
  bool needs_lease = false;
  // What can fail at start-up (binding a port, starting informers), before anything runs; may be
  // empty. A failure stops the start with an error naming the runnable.
  std::function<Status()> start;
  // Runs until `stop` is requested. A runnable that needs the lease runs again each time the
  // replica leads again; one without `run` only holds what `start` made until shutdown.
  std::function<void(std::stop_token)> run;
};

// Grants leadership: calls `lead` each time this replica wins the lease, with a token that is
// stopped when it loses it, and returns once `stop` is requested. Without leader election the
// replica leads from start to shutdown.
using Campaign =
    std::function<void(std::stop_token stop, const std::function<void(std::stop_token)>& lead)>;
Campaign AlwaysLead();

class Manager {
 public:
  void Add(Runnable runnable);
  // Every runnable's start, in the order added.
  Status Start();
  // Runs the runnables until `stop`: those without the lease at once, those with it whenever
  // `campaign` grants it. Returns once everything has stopped.
  void Run(std::stop_token stop, const Campaign& campaign);

 private:
  // Runs `runnables` (each on its own thread) until `stop`, then stops them in reverse order.
  static void RunAll(const std::vector<const Runnable*>& runnables, std::stop_token stop);

  std::vector<Runnable> runnables_;
};

// Blocks until `stop` is requested.
void WaitForStop(std::stop_token stop);

}  // namespace fulcrum::operator_main
