// Fuzzes kubeconfig parsing (YAML of any shape, as a user may hand us): it returns a config
// or an error naming the field, and never throws or crashes. The file lives in a folder that
// does not exist, so relative certificate and token paths resolve to nothing.
#include <cstdint>
#include <string>
#include <string_view>

#include "operator/kube/config/kubeconfig.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size < 1) return 0;
  // The first byte chooses between current-context and a named context.
  const std::string_view context = bytes[0] % 2 == 0 ? std::string_view() : "fuzz";
  const std::string_view yaml(reinterpret_cast<const char*>(bytes) + 1, size - 1);
  auto config =
      fulcrum::kube::ParseKubeconfigText(yaml, "/nonexistent-fulcrum-fuzz/kubeconfig", context);
  if (!config.ok()) (void)config.error().ToString();
  return 0;
}
