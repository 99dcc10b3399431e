#include "operator/cmd/fulcrum_operator/manager.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "common/log.h"

namespace fulcrum::operator_main {

void WaitForStop(std::stop_token stop) {
  std::mutex mutex;
  std::condition_variable_any stopped;
  std::unique_lock lock(mutex);
  stopped.wait(lock, stop, [] { return false; });
}

Campaign AlwaysLead() {
  return [](std::stop_token stop, const std::function<void(std::stop_token)>& lead) { lead(stop); };
}

void Manager::Add(Runnable runnable) {
  runnables_.push_back(std::move(runnable));
}

Status Manager::Start() {
  for (const Runnable& runnable : runnables_) {
    if (!runnable.start) continue;
    if (Status started = runnable.start(); !started.ok()) {
      Error error = started.error();
      if (error.field.empty()) error.field = runnable.name;
      return error;
    }
  }
  return Ok();
}

void Manager::RunAll(const std::vector<const Runnable*>& runnables, std::stop_token stop) {
  // One stop source each, so they stop one at a time, the last added first.
  std::vector<std::stop_source> sources(runnables.size());
  std::vector<std::jthread> threads;
  for (std::size_t i = 0; i < runnables.size(); ++i) {
    if (!runnables[i]->run) continue;
    threads.emplace_back([run = runnables[i]->run, token = sources[i].get_token()] { run(token); });
  }
  WaitForStop(stop);
  for (std::size_t i = runnables.size(); i-- > 0;) {
    if (!runnables[i]->run) continue;
    sources[i].request_stop();
    threads.back().join();
    threads.pop_back();
  }
}

void Manager::Run(std::stop_token stop, const Campaign& campaign) {
  std::vector<const Runnable*> always, leading;
  for (const Runnable& runnable : runnables_) {
    (runnable.needs_lease ? leading : always).push_back(&runnable);
  }
  std::stop_source everything;
  std::stop_callback forward(stop, [&] { everything.request_stop(); });
  std::jthread background([&] { RunAll(always, everything.get_token()); });
  campaign(everything.get_token(), [&](std::stop_token lead_stop) {
    log::Info("operator", "", "leading: starting the runnables that need the lease");
    RunAll(leading, lead_stop);
  });
  everything.request_stop();
}

}  // namespace fulcrum::operator_main
