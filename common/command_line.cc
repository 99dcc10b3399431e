#include "common/command_line.h"

#include <regex>

namespace fulcrum {
namespace {

// CLI11's errors carry the flag only inside their text ("Could not convert: --lr = x", "--k: Check
// ... FAILED", "The following arguments were not expected: 1 --bogus"): the first --name in it.
std::string FlagNamedIn(const std::string& message) {
  static const std::regex kFlag("--[A-Za-z0-9][A-Za-z0-9-]*");
  std::smatch match;
  if (std::regex_search(message, match, kFlag)) return match.str();
  return "flags";
}

}  // namespace

Result<CommandLine> ParseCommandLine(CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last-first
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return CommandLine::kHelpAsked;
  } catch (const CLI::ParseError& error) {
    return InvalidArgument(FlagNamedIn(error.what()), std::string(error.what()) + " (see --help)");
  }
  return CommandLine::kParsed;
}

}  // namespace fulcrum
