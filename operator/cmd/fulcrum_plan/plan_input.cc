#include "operator/cmd/fulcrum_plan/plan_input.h"

#include <array>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "operator/balancer/plan_validation.h"

namespace fulcrum::plan_cli {
namespace {

using nlohmann::json;

constexpr std::array kTopLevelFields = {"global_batch", "workers", "policy", "tail_seconds",
                                        "allow_accumulation"};
constexpr std::array kWorkerFields = {"id", "a", "k", "min", "max", "current"};

// The library names fields after its own structs; the user wrote the short JSON names.
constexpr std::array<std::pair<std::string_view, std::string_view>, 5> kLibraryToJsonNames = {{
    {".fixed_seconds", ".a"},
    {".seconds_per_sample", ".k"},
    {".min_batch", ".min"},
    {".max_batch", ".max"},
    {".current_batch", ".current"},
}};

std::string ToJsonFieldName(std::string field) {
  for (const auto& [library, json_name] : kLibraryToJsonNames) {
    const std::size_t at = field.find(library);
    if (at != std::string::npos) field.replace(at, library.size(), json_name);
  }
  return field;
}

template <std::size_t N>
Status RejectUnknownFields(const json& object, const std::array<const char*, N>& known,
                           const std::string& path) {
  for (const auto& [key, value] : object.items()) {
    bool found = false;
    for (const char* name : known) found = found || key == name;
    if (found) continue;
    std::string expected;
    for (const char* name : known) expected += (expected.empty() ? "" : ", ") + std::string(name);
    return InvalidArgument(path + key, "unknown field; expected one of " + expected);
  }
  return Ok();
}

Result<double> ReadNumber(const json& object, const char* key, const std::string& path,
                          std::optional<double> fallback) {
  if (!object.contains(key)) {
    if (fallback) return *fallback;
    return InvalidArgument(path + key, "is required");
  }
  const json& value = object.at(key);
  if (!value.is_number()) return InvalidArgument(path + key, "must be a number");
  return value.get<double>();
}

Result<int> ReadInteger(const json& object, const char* key, const std::string& path,
                        std::optional<int> fallback) {
  if (!object.contains(key)) {
    if (fallback) return *fallback;
    return InvalidArgument(path + key, "is required");
  }
  const json& value = object.at(key);
  if (!value.is_number_integer()) return InvalidArgument(path + key, "must be an integer");
  const int64_t number = value.get<int64_t>();
  if (number < std::numeric_limits<int>::min() || number > std::numeric_limits<int>::max()) {
    return InvalidArgument(path + key, "is out of range");
  }
  return static_cast<int>(number);
}

Result<balancer::WorkerSpec> ReadWorker(const json& object, std::size_t index, int global_batch) {
  const std::string path = "workers[" + std::to_string(index) + "].";
  if (!object.is_object()) {
    return InvalidArgument(path.substr(0, path.size() - 1), "must be an object");
  }
  if (Status status = RejectUnknownFields(object, kWorkerFields, path); !status.ok()) {
    return status.error();
  }
  balancer::WorkerSpec worker;
  if (!object.contains("id") || !object.at("id").is_string()) {
    return InvalidArgument(path + "id", "must be a string");
  }
  worker.id = object.at("id").get<std::string>();
  Result<double> a = ReadNumber(object, "a", path, std::nullopt);
  if (!a.ok()) return a.error();
  Result<double> k = ReadNumber(object, "k", path, std::nullopt);
  if (!k.ok()) return k.error();
  Result<int> min = ReadInteger(object, "min", path, 1);
  if (!min.ok()) return min.error();
  Result<int> max = ReadInteger(object, "max", path, std::max(global_batch, *min));
  if (!max.ok()) return max.error();
  Result<int> current = ReadInteger(object, "current", path, 0);
  if (!current.ok()) return current.error();
  worker.fixed_seconds = *a;
  worker.seconds_per_sample = *k;
  worker.min_batch = *min;
  worker.max_batch = *max;
  worker.current_batch = *current;
  return worker;
}

}  // namespace

Result<PlanInput> ParsePlanInput(std::string_view json_text) {
  const json document = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) {
    return InvalidArgument("", "the input is not valid JSON");
  }
  if (!document.is_object()) return InvalidArgument("", "the input must be a JSON object");
  if (Status status = RejectUnknownFields(document, kTopLevelFields, ""); !status.ok()) {
    return status.error();
  }
  PlanInput input;
  Result<int> global_batch = ReadInteger(document, "global_batch", "", std::nullopt);
  if (!global_batch.ok()) return global_batch.error();
  input.request.global_batch = *global_batch;
  Result<double> tail = ReadNumber(document, "tail_seconds", "", 0.0);
  if (!tail.ok()) return tail.error();
  input.request.tail_seconds = *tail;
  if (document.contains("allow_accumulation")) {
    if (!document.at("allow_accumulation").is_boolean()) {
      return InvalidArgument("allow_accumulation", "must be true or false");
    }
    input.request.allow_accumulation = document.at("allow_accumulation").get<bool>();
  }
  if (document.contains("policy")) {
    if (!document.at("policy").is_string()) {
      return InvalidArgument("policy", "must be a string: optimal, proportional or equal");
    }
    Result<balancer::PolicyKind> policy =
        balancer::ParsePolicyKind(document.at("policy").get<std::string>());
    if (!policy.ok()) return policy.error();
    input.policy = *policy;
  }
  if (!document.contains("workers") || !document.at("workers").is_array()) {
    return InvalidArgument("workers", "must be an array of {id, a, k, min, max}");
  }
  const json& workers = document.at("workers");
  for (std::size_t i = 0; i < workers.size(); ++i) {
    Result<balancer::WorkerSpec> worker = ReadWorker(workers[i], i, input.request.global_batch);
    if (!worker.ok()) return worker.error();
    input.request.workers.push_back(std::move(*worker));
  }
  if (Status status = balancer::ValidatePlanRequest(input.request); !status.ok()) {
    Error error = status.error();
    error.field = ToJsonFieldName(std::move(error.field));
    return error;
  }
  return input;
}

}  // namespace fulcrum::plan_cli
