#include "bench/sim/scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

namespace fulcrum::sim {
namespace {

template <typename T>
Result<T> Read(const YAML::Node& node, const char* key, const std::string& path,
               std::optional<T> fallback = std::nullopt) {
  const YAML::Node value = node[key];
  if (!value) {
    if (fallback) return *fallback;
    return InvalidArgument(path + key, "is required");
  }
  try {
    return value.as<T>();
  } catch (const YAML::Exception&) {
    return InvalidArgument(path + key, "has the wrong type");
  }
}

Status RequirePositive(double value, const std::string& field) {
  if (!std::isfinite(value) || value <= 0.0) {
    return InvalidArgument(field, "must be a finite number > 0");
  }
  return Ok();
}

Status RequireNonNegative(double value, const std::string& field) {
  if (!std::isfinite(value) || value < 0.0) {
    return InvalidArgument(field, "must be a finite number >= 0");
  }
  return Ok();
}

Result<GpuProfile> ReadProfile(const YAML::Node& node, const std::string& path) {
  GpuProfile profile;
  Result<std::string> product = Read<std::string>(node, "product", path);
  Result<double> fixed = Read<double>(node, "fixed_seconds", path);
  Result<double> per_sample = Read<double>(node, "seconds_per_sample", path);
  Result<double> memory = Read<double>(node, "memory_gib", path);
  Result<double> base = Read<double>(node, "memory_base_gib", path, std::optional(0.0));
  Result<double> per_sample_memory =
      Read<double>(node, "memory_per_sample_gib", path, std::optional(0.0));
  Result<std::string> source = Read<std::string>(node, "source", path);
  Result<int> min_efficient = Read<int>(node, "min_efficient_batch", path, std::optional(0));
  for (const Error* error :
       {product.ok() ? nullptr : &product.error(), fixed.ok() ? nullptr : &fixed.error(),
        per_sample.ok() ? nullptr : &per_sample.error(), memory.ok() ? nullptr : &memory.error(),
        base.ok() ? nullptr : &base.error(),
        per_sample_memory.ok() ? nullptr : &per_sample_memory.error(),
        source.ok() ? nullptr : &source.error(),
        min_efficient.ok() ? nullptr : &min_efficient.error()}) {
    if (error != nullptr) return *error;
  }
  profile = {*product,           *fixed,  *per_sample,   *memory, *base,
             *per_sample_memory, *source, *min_efficient};
  if (profile.min_efficient_batch < 0) {
    return InvalidArgument(path + "min_efficient_batch", "must be >= 0 (0: none)");
  }
  for (const Status& status :
       {RequireNonNegative(profile.fixed_seconds, path + "fixed_seconds"),
        RequirePositive(profile.seconds_per_sample, path + "seconds_per_sample"),
        RequirePositive(profile.memory_gib, path + "memory_gib"),
        RequireNonNegative(profile.memory_base_gib, path + "memory_base_gib"),
        RequireNonNegative(profile.memory_per_sample_gib, path + "memory_per_sample_gib")}) {
    if (!status.ok()) return status.error();
  }
  if (profile.source.empty())
    return InvalidArgument(path + "source", "cite where numbers come from");
  return profile;
}

Result<WorkerGroup> ReadGroup(const YAML::Node& node, const std::string& path,
                              const Scenario& scenario) {
  Result<std::string> profile = Read<std::string>(node, "profile", path);
  if (!profile.ok()) return profile.error();
  if (!scenario.profiles.contains(*profile)) {
    return InvalidArgument(path + "profile", "no profile named \"" + *profile + "\"");
  }
  Result<int> count = Read<int>(node, "count", path, std::optional(1));
  if (!count.ok()) return count.error();
  if (*count < 1) return InvalidArgument(path + "count", "must be >= 1");
  return WorkerGroup{*profile, *count};
}

Result<Event> ReadEvent(const YAML::Node& node, const std::string& path, const Scenario& scenario) {
  Event event;
  Result<int64_t> step = Read<int64_t>(node, "step", path);
  if (!step.ok()) return step.error();
  if (*step < 0 || *step >= scenario.steps) {
    return InvalidArgument(path + "step", "must be in [0, steps)");
  }
  event.step = *step;
  Result<std::string> kind = Read<std::string>(node, "kind", path);
  if (!kind.ok()) return kind.error();
  if (*kind == "join") {
    event.kind = EventKind::kJoin;
    Result<WorkerGroup> joiners = ReadGroup(node, path, scenario);
    if (!joiners.ok()) return joiners.error();
    event.joiners = *joiners;
    return event;
  }
  if (*kind != "slowdown" && *kind != "leave") {
    return InvalidArgument(path + "kind", "must be slowdown, leave or join");
  }
  event.kind = *kind == "leave" ? EventKind::kLeave : EventKind::kSlowdown;
  Result<std::string> worker = Read<std::string>(node, "worker", path);
  if (!worker.ok()) return worker.error();
  event.worker = *worker;
  if (event.kind == EventKind::kSlowdown) {
    Result<double> factor = Read<double>(node, "factor", path);
    if (!factor.ok()) return factor.error();
    if (Status status = RequirePositive(*factor, path + "factor"); !status.ok()) {
      return status.error();
    }
    event.factor = *factor;
  }
  return event;
}

Result<Scenario> FromYaml(const YAML::Node& root) {
  Scenario scenario;
  Result<std::string> name = Read<std::string>(root, "name", "");
  Result<int> batch = Read<int>(root, "global_batch", "");
  Result<int64_t> steps = Read<int64_t>(root, "steps", "");
  if (!name.ok()) return name.error();
  if (!batch.ok()) return batch.error();
  if (!steps.ok()) return steps.error();
  scenario.name = *name;
  scenario.global_batch = *batch;
  scenario.steps = *steps;
  if (scenario.global_batch < 1) return InvalidArgument("global_batch", "must be >= 1");
  if (scenario.steps < 1) return InvalidArgument("steps", "must be >= 1");
  scenario.description =
      *Read<std::string>(root, "description", "", std::optional<std::string>(""));
  Result<uint64_t> seed = Read<uint64_t>(root, "seed", "", std::optional<uint64_t>(1));
  Result<double> tail = Read<double>(root, "tail_seconds", "", std::optional(0.0));
  if (!seed.ok()) return seed.error();
  if (!tail.ok()) return tail.error();
  scenario.seed = *seed;
  scenario.tail_seconds = *tail;
  if (Status status = RequireNonNegative(scenario.tail_seconds, "tail_seconds"); !status.ok()) {
    return status.error();
  }
  if (const YAML::Node balancer = root["balancer"]) {
    Result<int> interval = Read<int>(balancer, "interval_steps", "balancer.", std::optional(10));
    Result<double> gain = Read<double>(balancer, "min_gain", "balancer.", std::optional(0.05));
    if (!interval.ok()) return interval.error();
    if (!gain.ok()) return gain.error();
    scenario.interval_steps = *interval;
    scenario.min_gain = *gain;
    Result<int> lead = Read<int>(balancer, "apply_lead_steps", "balancer.", std::optional(0));
    if (!lead.ok()) return lead.error();
    if (*lead < 0 || *lead > 100) {
      return InvalidArgument("balancer.apply_lead_steps", "must be an integer in [0, 100]");
    }
    scenario.apply_lead_steps = *lead;
    // Noise units: the gain bar once a change was answered (ControllerConfig::gain_noise_sigmas),
    // and how far past its history a report leans to be held in a run of contradictions
    // (FitterConfig::support_sigmas; 4, the outlier bar itself, is the rule before holding).
    struct SigmaSetting {
      const char* key;
      std::optional<double>* field;
      double least;
      const char* range;
    };
    for (const SigmaSetting& setting :
         {SigmaSetting{"gain_noise_sigmas", &scenario.gain_noise_sigmas, 0.0,
                       "must be a number in [0, 10], e.g. 1"},
          SigmaSetting{"support_sigmas", &scenario.support_sigmas, 0.5,
                       "must be a number in [0.5, 10], e.g. 2"}}) {
      if (!balancer[setting.key]) continue;
      Result<double> sigmas = Read<double>(balancer, setting.key, "balancer.");
      if (!sigmas.ok()) return sigmas.error();
      if (!(*sigmas >= setting.least && *sigmas <= 10.0)) {
        return InvalidArgument(std::string("balancer.") + setting.key, setting.range);
      }
      *setting.field = *sigmas;
    }
    // Reports that size a confirmed change before its plan, after a slowdown and a speed-up
    // (ControllerConfig): three confirm one, so fewer cannot be asked for. And the reports after
    // which evidence the line no longer agrees with is retired (FitterConfig::
    // stale_after_reports; 0: never).
    struct IntSetting {
      const char* key;
      std::optional<int>* field;
      int least;
      int most;
      const char* range;
    };
    for (const IntSetting& setting :
         {IntSetting{"slowdown_evidence_to_plan", &scenario.slowdown_evidence_to_plan, 3, 15,
                     "must be an integer in [3, 15], e.g. 4"},
          IntSetting{"speed_evidence_to_plan", &scenario.speed_evidence_to_plan, 3, 15,
                     "must be an integer in [3, 15], e.g. 4"},
          IntSetting{"stale_after_reports", &scenario.stale_after_reports, 0, 10000,
                     "must be an integer in [0, 10000], e.g. 50 (0: never)"}}) {
      if (!balancer[setting.key]) continue;
      Result<int> value = Read<int>(balancer, setting.key, "balancer.");
      if (!value.ok()) return value.error();
      if (*value < setting.least || *value > setting.most) {
        return InvalidArgument(std::string("balancer.") + setting.key, setting.range);
      }
      *setting.field = *value;
    }
  }
  if (const YAML::Node noise = root["noise"]) {
    Result<double> compute = Read<double>(noise, "compute", "noise.", std::optional(0.0));
    Result<double> comm = Read<double>(noise, "comm", "noise.", std::optional(0.0));
    Result<double> probability =
        Read<double>(noise, "outlier_probability", "noise.", std::optional(0.0));
    Result<double> factor = Read<double>(noise, "outlier_factor", "noise.", std::optional(1.0));
    Result<double> jitter = Read<double>(noise, "jitter", "noise.", std::optional(0.0));
    Result<double> contention =
        Read<double>(noise, "contention_seconds", "noise.", std::optional(0.0));
    Result<double> startup = Read<double>(noise, "startup_seconds", "noise.", std::optional(0.0));
    Result<double> shared = Read<double>(noise, "shared_device", "noise.", std::optional(0.0));
    for (const auto* result :
         {&compute, &comm, &probability, &factor, &jitter, &contention, &startup, &shared}) {
      if (!result->ok()) return result->error();
    }
    Result<int> startup_steps = Read<int>(noise, "startup_steps", "noise.", std::optional(0));
    if (!startup_steps.ok()) return startup_steps.error();
    scenario.noise = {*compute,    *comm,    *probability,   *factor, *jitter,
                      *contention, *startup, *startup_steps, *shared};
    if (!(scenario.noise.shared_device >= 0.0 && scenario.noise.shared_device <= 1.0)) {
      return InvalidArgument("noise.shared_device", "must be a number in [0, 1], e.g. 0.15");
    }
    if (!(scenario.noise.startup_seconds >= 0.0 && scenario.noise.startup_seconds <= 10.0)) {
      return InvalidArgument("noise.startup_seconds", "must be a number of seconds in [0, 10]");
    }
    if (scenario.noise.startup_steps < 0 || scenario.noise.startup_steps > 10000) {
      return InvalidArgument("noise.startup_steps", "must be an integer in [0, 10000]");
    }
    if (Status status =
            RequireNonNegative(scenario.noise.contention_seconds, "noise.contention_seconds");
        !status.ok()) {
      return status.error();
    }
    if (scenario.noise.jitter < 0 || scenario.noise.jitter > 0.3) {
      return InvalidArgument("noise.jitter", "must be in [0, 0.3]");
    }
    if (scenario.noise.compute < 0 || scenario.noise.compute > 0.3) {
      return InvalidArgument("noise.compute", "must be in [0, 0.3]");
    }
    if (scenario.noise.outlier_probability < 0 || scenario.noise.outlier_probability > 1) {
      return InvalidArgument("noise.outlier_probability", "must be in [0, 1]");
    }
  }
  const YAML::Node profiles = root["profiles"];
  if (!profiles || !profiles.IsMap() || profiles.size() == 0) {
    return InvalidArgument("profiles", "must map profile names to GPU profiles");
  }
  for (const auto& entry : profiles) {
    const std::string key = entry.first.as<std::string>();
    Result<GpuProfile> profile = ReadProfile(entry.second, "profiles." + key + ".");
    if (!profile.ok()) return profile.error();
    scenario.profiles.emplace(key, *profile);
  }
  const YAML::Node workers = root["workers"];
  if (!workers || !workers.IsSequence() || workers.size() == 0) {
    return InvalidArgument("workers", "must list worker groups {profile, count}");
  }
  for (std::size_t i = 0; i < workers.size(); ++i) {
    Result<WorkerGroup> group =
        ReadGroup(workers[i], "workers[" + std::to_string(i) + "].", scenario);
    if (!group.ok()) return group.error();
    scenario.workers.push_back(*group);
  }
  if (const YAML::Node events = root["events"]) {
    for (std::size_t i = 0; i < events.size(); ++i) {
      Result<Event> event = ReadEvent(events[i], "events[" + std::to_string(i) + "].", scenario);
      if (!event.ok()) return event.error();
      // A join or leave re-forms the generation with a plan of its own at once, which the
      // simulator does not model behind a lead; slowdowns are what the lead is for.
      if (scenario.apply_lead_steps > 0 && event->kind != EventKind::kSlowdown) {
        return InvalidArgument("events[" + std::to_string(i) + "].kind",
                               "only slowdown events go with balancer.apply_lead_steps > 0");
      }
      scenario.events.push_back(*event);
    }
  }
  std::stable_sort(scenario.events.begin(), scenario.events.end(),
                   [](const Event& x, const Event& y) { return x.step < y.step; });
  return scenario;
}

}  // namespace

Result<Scenario> ParseScenario(const std::string& yaml_text) {
  try {
    return FromYaml(YAML::Load(yaml_text));
  } catch (const YAML::Exception& error) {
    return InvalidArgument("", std::string("not valid YAML: ") + error.what());
  }
}

Result<Scenario> LoadScenario(const std::string& path) {
  std::ifstream file(path);
  if (!file) return MakeError(ErrorCode::kNotFound, "cannot read " + path);
  std::ostringstream text;
  text << file.rdbuf();
  Result<Scenario> scenario = ParseScenario(text.str());
  if (!scenario.ok()) {
    Error error = scenario.error();
    error.message = path + ": " + error.message;
    return error;
  }
  return scenario;
}

}  // namespace fulcrum::sim
