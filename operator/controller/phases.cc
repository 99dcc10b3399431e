#include "operator/controller/phases.h"

#include <array>
#include <utility>

namespace fulcrum::controller {
namespace {

constexpr std::array<std::pair<JobPhase, std::string_view>, 6> kJobPhases = {{
    {JobPhase::kPending, "Pending"},
    {JobPhase::kRunning, "Running"},
    {JobPhase::kRebalancing, "Rebalancing"},
    {JobPhase::kSuspended, "Suspended"},
    {JobPhase::kSucceeded, "Succeeded"},
    {JobPhase::kFailed, "Failed"},
}};

constexpr std::array<std::pair<PodPhase, std::string_view>, 5> kPodPhases = {{
    {PodPhase::kPending, "Pending"},
    {PodPhase::kRunning, "Running"},
    {PodPhase::kSucceeded, "Succeeded"},
    {PodPhase::kFailed, "Failed"},
    {PodPhase::kUnknown, "Unknown"},
}};

template <typename Phase, std::size_t N>
std::string_view NameOf(const std::array<std::pair<Phase, std::string_view>, N>& names,
                        Phase phase) {
  for (const auto& [value, name] : names) {
    if (value == phase) return name;
  }
  return "Unknown";
}

template <typename Phase, std::size_t N>
Phase Parse(const std::array<std::pair<Phase, std::string_view>, N>& names, std::string_view text,
            Phase fallback) {
  for (const auto& [value, name] : names) {
    if (name == text) return value;
  }
  return fallback;
}

}  // namespace

std::string_view ToString(JobPhase phase) {
  return NameOf(kJobPhases, phase);
}

JobPhase ParseJobPhase(std::string_view text) {
  return Parse(kJobPhases, text, JobPhase::kPending);
}

bool Finished(JobPhase phase) {
  return phase == JobPhase::kSucceeded || phase == JobPhase::kFailed;
}

bool Training(JobPhase phase) {
  return phase == JobPhase::kRunning || phase == JobPhase::kRebalancing;
}

std::string_view ToString(PodPhase phase) {
  return NameOf(kPodPhases, phase);
}

PodPhase ParsePodPhase(std::string_view text) {
  if (text.empty()) return PodPhase::kPending;
  return Parse(kPodPhases, text, PodPhase::kUnknown);
}

bool Ended(PodPhase phase) {
  return phase == PodPhase::kSucceeded || phase == PodPhase::kFailed;
}

}  // namespace fulcrum::controller
