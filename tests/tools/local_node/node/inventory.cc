#include "tests/tools/local_node/node/inventory.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace fulcrum::local_node {
namespace {

// The same rules as tests/cluster/nodes/render-nodes, which renders kwok's nodes.
const std::regex kDnsLabel("^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$");
const std::regex kLabelValue("^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$");
const std::regex kQuantity("^[0-9]+(\\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|M|G|T)?$");

Status NoUnknownKeys(const YAML::Node& map, const std::set<std::string>& allowed,
                     const std::string& field) {
  for (const auto& entry : map) {
    const std::string key = entry.first.as<std::string>();
    if (allowed.count(key) == 0) {
      std::string names;
      for (const auto& name : allowed) names += (names.empty() ? "" : ", ") + name;
      return InvalidArgument(field + "." + key, "unknown key; allowed: " + names);
    }
  }
  return Ok();
}

Result<int> PositiveInt(const YAML::Node& node, const std::string& field) {
  int value = 0;
  const std::string text = node && node.IsScalar() ? node.Scalar() : "";
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value <= 0) {
    return InvalidArgument(field, "must be a positive integer, got '" + text + "'");
  }
  return value;
}

Result<std::string> Matching(const YAML::Node& node, const std::regex& pattern,
                             const std::string& field, const std::string& expected) {
  const std::string text = node && node.IsScalar() ? node.Scalar() : "";
  if (!std::regex_match(text, pattern))
    return InvalidArgument(field, "must be " + expected + ", got '" + text + "'");
  return text;
}

Result<std::vector<NodeSpec>> ParseGroup(const YAML::Node& group, const std::string& field) {
  if (!group.IsMap())
    return InvalidArgument(field, "must be a mapping with namePrefix, count and gpu");
  if (Status status = NoUnknownKeys(
          group,
          {"namePrefix", "count", "gpu", "cpu", "memory", "pods", "labels", "emulatedSlowdown"},
          field);
      !status.ok()) {
    return status.error();
  }
  auto prefix = Matching(group["namePrefix"], kDnsLabel, field + ".namePrefix",
                         "a lower-case DNS label like 't4'");
  if (!prefix.ok()) return prefix.error();
  auto count = PositiveInt(group["count"], field + ".count");
  if (!count.ok()) return count.error();
  const YAML::Node gpu = group["gpu"];
  if (!gpu.IsMap())
    return InvalidArgument(field + ".gpu", "must be a mapping with product, memoryMiB and count");
  if (Status status = NoUnknownKeys(gpu, {"product", "memoryMiB", "count"}, field + ".gpu");
      !status.ok()) {
    return status.error();
  }
  auto product = Matching(gpu["product"], kLabelValue, field + ".gpu.product",
                          "a label value like 'Tesla-T4' (letters, digits, '-', '_', '.')");
  if (!product.ok()) return product.error();
  auto memory_mib = PositiveInt(gpu["memoryMiB"], field + ".gpu.memoryMiB");
  if (!memory_mib.ok()) return memory_mib.error();
  auto gpus = PositiveInt(gpu["count"], field + ".gpu.count");
  if (!gpus.ok()) return gpus.error();

  std::map<std::string, std::string> capacity;
  for (const auto& [key, fallback] :
       {std::pair{"cpu", "64"}, {"memory", "512Gi"}, {"pods", "110"}}) {
    const YAML::Node value = group[key];
    if (!value) {
      capacity[key] = fallback;
      continue;
    }
    auto quantity = Matching(value, kQuantity, field + "." + key,
                             std::string("a Kubernetes quantity like '") + fallback + "'");
    if (!quantity.ok()) return quantity.error();
    capacity[key] = *quantity;
  }
  capacity["nvidia.com/gpu"] = std::to_string(*gpus);

  std::string slowdown = "1";
  if (const YAML::Node value = group["emulatedSlowdown"]) {
    slowdown = value.IsScalar() ? value.Scalar() : "";
    if (auto parsed = ParseSlowdown(slowdown); !parsed.ok()) {
      return InvalidArgument(field + ".emulatedSlowdown", parsed.error().message);
    }
  }
  std::map<std::string, std::string> extra_labels;
  if (const YAML::Node labels = group["labels"]) {
    if (!labels.IsMap())
      return InvalidArgument(field + ".labels", "must be a mapping of label keys to values");
    for (const auto& entry : labels)
      extra_labels[entry.first.as<std::string>()] = entry.second.as<std::string>();
  }

  std::vector<NodeSpec> nodes;
  for (int n = 0; n < *count; ++n) {
    NodeSpec node;
    node.name = *prefix + "-" + std::to_string(n);
    node.labels = {
        {"kubernetes.io/hostname", node.name},
        {"kubernetes.io/os", "linux"},
        {"kubernetes.io/arch", "amd64"},
        {"node.kubernetes.io/instance-type", "emulated-" + *prefix},
        {"nvidia.com/gpu.present", "true"},
        {"nvidia.com/gpu.product", *product},
        {"nvidia.com/gpu.memory", std::to_string(*memory_mib)},
        {"nvidia.com/gpu.count", std::to_string(*gpus)},
        {kManagedByLabel, kManagedByValue},
        {kSlowdownLabel, slowdown},
    };
    for (const auto& [key, value] : extra_labels) node.labels[key] = value;
    node.capacity = capacity;
    node.slowdown = node.labels[kSlowdownLabel];
    nodes.push_back(std::move(node));
  }
  return nodes;
}

}  // namespace

Result<double> ParseSlowdown(const std::string& text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() ||
      !std::isfinite(value) || value < 1.0) {
    return InvalidArgument(
        kSlowdownLabel, "must be a number >= 1 (the emulated slowdown factor), got '" + text + "'");
  }
  return value;
}

Result<std::vector<NodeSpec>> ParseInventory(const std::string& yaml_text,
                                             const std::string& file_name) {
  const auto in_file = [&](const Error& error) {
    return Error{error.code, file_name + ": " + error.field + ": " + error.message, error.field};
  };
  YAML::Node document;
  try {
    document = YAML::Load(yaml_text);
  } catch (const YAML::Exception& error) {
    return InvalidArgument("", file_name + ": not valid YAML: " + error.what());
  }
  try {
    if (!document.IsMap() || !document["nodes"].IsSequence() || document["nodes"].size() == 0) {
      return InvalidArgument("nodes", file_name +
                                          " must hold a non-empty list under 'nodes:' "
                                          "(see tests/cluster/nodes/local-mixed.yaml)");
    }
    if (Status status = NoUnknownKeys(document, {"nodes"}, "(top level)"); !status.ok())
      return in_file(status.error());
    std::vector<NodeSpec> nodes;
    std::set<std::string> names;
    for (std::size_t i = 0; i < document["nodes"].size(); ++i) {
      const std::string field = "nodes[" + std::to_string(i) + "]";
      auto group = ParseGroup(document["nodes"][i], field);
      if (!group.ok()) return in_file(group.error());
      for (NodeSpec& node : *group) {
        if (!names.insert(node.name).second) {
          return in_file(InvalidArgument(field + ".namePrefix",
                                         "node name '" + node.name +
                                             "' repeats an earlier one; give each group "
                                             "its own namePrefix"));
        }
        nodes.push_back(std::move(node));
      }
    }
    return nodes;
  } catch (
      const YAML::Exception& error) {  // a value of the wrong shape (a list where text belongs)
    return InvalidArgument("", file_name + ": " + error.what());
  }
}

Result<std::vector<NodeSpec>> LoadInventory(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("--nodes", "cannot read the node inventory '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return ParseInventory(text.str(), path);
}

}  // namespace fulcrum::local_node
