// Kubernetes' $(VAR) expansion of env values, command and args
// (k8s.io/kubernetes third_party/forked/golang/expansion): `$(NAME)` becomes the
// value `lookup` gives, an unknown NAME stays `$(NAME)`, `$$` becomes `$`, `$`
// before anything else is kept, an unclosed `$(` stays literal.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace fulcrum::local_node {

using VariableLookup = std::function<std::optional<std::string>(std::string_view name)>;

std::string Expand(std::string_view input, const VariableLookup& lookup);

}  // namespace fulcrum::local_node
