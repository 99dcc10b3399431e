// Runs a CLI11 parser over a program's arguments and turns its exceptions into errors as values
// that name the flag, so every Fulcrum binary reports bad flags the same way.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace fulcrum {

enum class CommandLine { kParsed, kHelpAsked };

// `args` without the program name. kHelpAsked for --help/-h (print app.help() and exit 0).
// A parse error names the flag it is about ("--lr"), or "flags" when it is about none.
Result<CommandLine> ParseCommandLine(CLI::App& app, const std::vector<std::string>& args);

// A flag whose value names one of a fixed set of choices (CLI11's own transformers also take
// the enum's numbers, and print them in errors).
template <typename Enum>
CLI::Option* AddChoice(CLI::App& app, const std::string& flag, Enum& out,
                       std::vector<std::pair<std::string, Enum>> choices, const std::string& help) {
  std::vector<std::string> names;
  std::string current;
  for (const auto& [name, value] : choices) {
    names.push_back(name);
    if (value == out) current = name;
  }
  return app
      .add_option_function<std::string>(
          flag,
          [&out, choices](const std::string& value) {
            for (const auto& [name, choice] : choices) {
              if (name == value) out = choice;
            }
          },
          help)
      ->check(CLI::IsMember(names))
      ->default_str(current);
}

// Every binary's flags: a flag given twice takes its last value (so a job's own args, appended
// after the operator's, override them), and the help shows the defaults.
inline void SetFlagDefaults(CLI::App& app) {
  app.option_defaults()->always_capture_default()->multi_option_policy(
      CLI::MultiOptionPolicy::TakeLast);
}

// A comma-separated list of numbers ("3,5,8"); given twice, the last list wins.
template <typename Number>
CLI::Option* AddList(CLI::App& app, const std::string& flag, std::vector<Number>& out,
                     const std::string& help) {
  return app.add_option_function<std::string>(
      flag,
      [&out, flag](const std::string& text) {
        std::vector<Number> values;
        std::size_t start = 0;
        while (start <= text.size()) {
          std::size_t end = text.find(',', start);
          if (end == std::string::npos) end = text.size();
          Number value{};
          if (!CLI::detail::lexical_cast(text.substr(start, end - start), value)) {
            throw CLI::ValidationError(
                flag, "expected numbers separated by commas, got \"" + text + "\"");
          }
          values.push_back(value);
          start = end + 1;
        }
        out = std::move(values);
      },
      help);
}

// A flag that takes true or false, nothing else (CLI11 would also take yes, on, 1, ...).
inline CLI::Option* AddBool(CLI::App& app, const std::string& flag, bool& out,
                            const std::string& help) {
  return app.add_option(flag, out, help)
      ->check(CLI::IsMember({"true", "false"}))
      ->default_str(out ? "true" : "false");
}

}  // namespace fulcrum
