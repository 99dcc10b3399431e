// The serving side of the coordinator benchmark, run as a child process so that its CPU,
// memory and threads can be read from /proc apart from the load generator's:
//   coordinator: the real CoordinatorService (what the operator hosts) with every job of the
//                token file registered;
//   bare:        a gRPC service on the same port settings that reads every message and
//                discards it: the cost of gRPC, TLS and protobuf alone, the baseline.
//
// It talks to its parent over stdin/stdout, one line each: it prints {"port": N} once
// serving; "reset" clears its counters ({"ok": true}); "report" prints them as JSON; the end
// of stdin stops it.
#pragma once

#include <string>

namespace fulcrum::bench {

enum class ServerKind { kCoordinator, kBareGrpc };

struct LoadServerOptions {
  ServerKind kind = ServerKind::kCoordinator;
  std::string tokens_file;           // "JOB TOKEN" lines (operator/coordinator/token_file.h)
  std::string tls_certificate_file;  // both empty: plaintext
  std::string tls_key_file;
  int global_batch = 512;
  int min_workers = 8;
};

// Returns the process's exit code.
int ServeLoad(const LoadServerOptions& options);

}  // namespace fulcrum::bench
