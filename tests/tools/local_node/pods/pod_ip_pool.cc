#include "tests/tools/local_node/pods/pod_ip_pool.h"

#include <arpa/inet.h>

#include <charconv>

namespace fulcrum::local_node {
namespace {

std::optional<std::uint32_t> ParseAddress(const std::string& text) {
  in_addr address{};
  if (::inet_pton(AF_INET, text.c_str(), &address) != 1) return std::nullopt;
  return ntohl(address.s_addr);
}

std::string FormatAddress(std::uint32_t value) {
  in_addr address{htonl(value)};
  char text[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &address, text, sizeof text);
  return text;
}

}  // namespace

Result<PodIpPool> PodIpPool::Create(const std::string& cidr) {
  const auto bad = [&](const std::string& why) {
    return InvalidArgument("--pod-ip-range", why + ", got '" + cidr + "' (e.g. 127.77.0.0/16)");
  };
  const auto slash = cidr.find('/');
  if (slash == std::string::npos) return bad("must be an address range like A.B.C.D/N");
  const auto base = ParseAddress(cidr.substr(0, slash));
  int prefix = 0;
  const std::string prefix_text = cidr.substr(slash + 1);
  const auto [end, error] =
      std::from_chars(prefix_text.data(), prefix_text.data() + prefix_text.size(), prefix);
  if (!base || error != std::errc() || end != prefix_text.data() + prefix_text.size()) {
    return bad("must be an address range like A.B.C.D/N");
  }
  if (prefix < 8 || prefix > 30) return bad("the prefix length must be between 8 and 30");
  if ((*base >> 24) != 127)
    return bad("must lie in loopback (127.0.0.0/8): pods here listen on loopback");
  const std::uint32_t mask = prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - prefix);
  const std::uint32_t first = *base & mask;
  return PodIpPool(first, first | ~mask);
}

std::optional<std::string> PodIpPool::Allocate() {
  for (std::uint32_t candidate = first_ + 1; candidate < last_; ++candidate) {
    const std::uint32_t low_byte = candidate & 0xff;
    if (low_byte == 0 || low_byte == 255 || used_.count(candidate) > 0) continue;
    used_.insert(candidate);
    return FormatAddress(candidate);
  }
  return std::nullopt;
}

bool PodIpPool::Reserve(const std::string& address) {
  const auto value = ParseAddress(address);
  if (!value || *value <= first_ || *value >= last_) return false;
  used_.insert(*value);
  return true;
}

void PodIpPool::Release(const std::string& address) {
  if (const auto value = ParseAddress(address)) used_.erase(*value);
}

}  // namespace fulcrum::local_node
