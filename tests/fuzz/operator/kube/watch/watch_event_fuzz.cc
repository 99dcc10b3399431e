// Fuzzes the decoding of watch and list bodies as they arrive in chunks (the first input byte
// sets the chunk size, the rest is the body):
//   - NdjsonDecoder yields the same lines as splitting the whole body at "\n" (dropping a
//     "\r" before it, and blank lines), however it is chunked;
//   - each line decodes as a watch event or an error, and a decoded event's object and
//     resourceVersion can be read and written out as JSON text;
//   - ListStreamDecoder finds the same items and metadata chunked as all at once.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "operator/kube/watch/list_stream_decoder.h"
#include "operator/kube/watch/ndjson_decoder.h"
#include "operator/kube/watch/watch_event.h"

namespace {

constexpr std::size_t kMaxLineBytes = 4096;

[[noreturn]] void Violated(const char* what) {
  std::fprintf(stderr, "watch_event_fuzz: %s\n", what);
  std::abort();
}

std::vector<std::string> CompleteLines(std::string_view body) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = body.find('\n', start)) != std::string_view::npos; start = end + 1) {
    std::string_view line = body.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") != std::string_view::npos) lines.emplace_back(line);
  }
  return lines;
}

struct Captured {
  std::vector<std::string> items;
  std::vector<std::string> metadata;
  bool complete = false;
  bool operator==(const Captured&) const = default;
};

Captured SplitList(std::string_view body, std::size_t chunk) {
  Captured captured;
  fulcrum::kube::ListStreamDecoder decoder(
      [&](std::string_view item) { captured.items.emplace_back(item); },
      [&](std::string_view metadata) { captured.metadata.emplace_back(metadata); });
  for (std::size_t at = 0; at < body.size(); at += chunk) decoder.Feed(body.substr(at, chunk));
  captured.complete = decoder.complete();
  return captured;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size < 1) return 0;
  const std::size_t chunk = bytes[0] % 32 + 1;
  const std::string_view body(reinterpret_cast<const char*>(bytes) + 1, size - 1);

  // A small line limit, so that inputs reach the too-long error too.
  fulcrum::kube::NdjsonDecoder lines(kMaxLineBytes);
  std::vector<std::string> decoded;
  bool too_long = false;
  for (std::size_t at = 0; at < body.size() && !too_long; at += chunk) {
    lines.Feed(body.substr(at, chunk));
    while (true) {
      auto line = lines.NextLine();
      if (!line.ok()) {
        too_long = true;
        break;
      }
      if (!line->has_value()) break;
      decoded.push_back(std::move(**line));
    }
  }
  const std::vector<std::string> expected = CompleteLines(body);
  if (!too_long && decoded != expected) Violated("chunked lines differ from the whole body's");
  if (too_long && body.size() <= kMaxLineBytes) Violated("a short line was called too long");

  for (const std::string& line : decoded) {
    auto event = fulcrum::kube::DecodeWatchEvent(line, "fuzz");
    if (!event.ok()) {
      (void)event.error().ToString();
      continue;
    }
    (void)event->ResourceVersion();
    (void)event->object.dump();
    (void)fulcrum::kube::ToString(event->type);
  }

  if (SplitList(body, chunk) != SplitList(body, body.size() + 1)) {
    Violated("chunked list items differ from the whole body's");
  }
  return 0;
}
