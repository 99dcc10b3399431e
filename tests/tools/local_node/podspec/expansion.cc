#include "tests/tools/local_node/podspec/expansion.h"

namespace fulcrum::local_node {

// A line-for-line port of Expand and tryReadVariableName from
// third_party/forked/golang/expansion/expand.go, so that edge cases (an unclosed
// `$(` lets scanning resume right after the `(`; `$()` looks up the empty name)
// behave exactly as in kubelet.
std::string Expand(std::string_view input, const VariableLookup& lookup) {
  std::string output;
  output.reserve(input.size());
  std::size_t checkpoint = 0;
  for (std::size_t cursor = 0; cursor < input.size(); ++cursor) {
    if (input[cursor] != '$' || cursor + 1 >= input.size()) continue;
    output.append(input.substr(checkpoint, cursor - checkpoint));
    const std::string_view rest = input.substr(cursor + 1);
    std::size_t advance = 1;
    if (rest[0] == '$') {
      output.push_back('$');  // `$$` is an escaped `$`
    } else if (rest[0] == '(') {
      const std::size_t closer = rest.find(')', 1);
      if (closer == std::string_view::npos) {
        output.append("$(");  // incomplete reference: literal, scanning goes on after the `(`
      } else {
        const std::string_view name = rest.substr(1, closer - 1);
        if (std::optional<std::string> value = lookup(name)) {
          output.append(*value);
        } else {
          output.append("$(").append(name).append(")");
        }
        advance = closer + 1;
      }
    } else {
      output.push_back('$');  // `$` that starts no reference is kept with the character after it
      output.push_back(rest[0]);
    }
    cursor += advance;
    checkpoint = cursor + 1;
  }
  output.append(input.substr(checkpoint));
  return output;
}

}  // namespace fulcrum::local_node
