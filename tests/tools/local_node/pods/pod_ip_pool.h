// Pod addresses on loopback: every pod gets its own 127.x.y.z, so that pods on
// one machine can listen on the same port, each on its own address, as pods in
// their own network namespaces do. (Processes must bind to their pod IP, which
// they read from the downward API; 0.0.0.0 would be shared by all of them.)
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "common/result.h"

namespace fulcrum::local_node {

class PodIpPool {
 public:
  // `cidr` like "127.77.0.0/16": inside 127.0.0.0/8, prefix length 8..30.
  static Result<PodIpPool> Create(const std::string& cidr);

  // The lowest free address (never the range's first or last, nor one ending in .0 or .255).
  std::optional<std::string> Allocate();
  // Marks an address as taken (an adopted pod's); false if it is outside the range.
  bool Reserve(const std::string& address);
  void Release(const std::string& address);
  std::size_t in_use() const { return used_.size(); }

 private:
  PodIpPool(std::uint32_t first, std::uint32_t last) : first_(first), last_(last) {}
  std::uint32_t first_, last_;
  std::set<std::uint32_t> used_;
};

}  // namespace fulcrum::local_node
