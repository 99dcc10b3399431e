// Kubelet's log endpoint, so that `kubectl logs [-f] [--previous]` works for
// pods of the local nodes: HTTPS on the node's kubelet port, answering
// GET /containerLogs/{namespace}/{pod}/{container} for clients whose certificate
// chains to the configured CA (the API server's --kubelet-client-certificate).
// Query options: follow, previous, tailLines, limitBytes; timestamps, sinceSeconds
// and sinceTime are refused with 400 (the log files carry no per-line times).
// /exec, /attach, /portForward and /run answer 501 with a sentence saying so.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/result.h"

namespace fulcrum::local_node {

struct LogRequest {
  std::string ns;
  std::string pod;
  std::string container;
  bool follow = false;
  bool previous = false;
  std::optional<std::int64_t> tail_lines;
  std::optional<std::int64_t> limit_bytes;
};

// One container's log file, as the pod side knows it.
struct LogLocation {
  std::filesystem::path file;
  // While true, a follow keeps waiting for more; once false (the container
  // ended) the rest of the file is sent and the response ends. Called about
  // every 100 ms by each open follow, from that connection's thread (so it must
  // be thread-safe and quick); empty means "not writing".
  std::function<bool()> still_writing;
};

// Answers which file holds a container's log. Errors become HTTP answers whose
// body is the message: kNotFound -> 404; kInvalidArgument / kFailedPrecondition
// (e.g. `previous terminated container "c" in pod "p" not found`) -> 400; any
// other code -> 500. Find is called from connection threads, concurrently.
class LogDirectory {
 public:
  virtual ~LogDirectory() = default;
  virtual Result<LogLocation> Find(const LogRequest& request) const = 0;
};

struct LogServerOptions {
  std::string address = "127.0.0.1";
  int port = 0;                // 0: any free port (see LogServer::port)
  std::string cert_file;       // serving certificate (PEM)
  std::string key_file;        // its key (PEM)
  std::string client_ca_file;  // clients must present a certificate signed by this CA
};

// One thread accepts; each connection gets its own thread (the API server opens
// few, and keeps them alive between requests). A follow whose client hangs up
// stops within a poll interval; it does not wait for the container to end.
class LogServer {
 public:
  // Binds and starts serving on background threads; errors name the option at
  // fault (cert_file, key_file, client_ca_file, address, port).
  static Result<std::unique_ptr<LogServer>> Start(const LogServerOptions& options,
                                                  std::shared_ptr<const LogDirectory> directory);
  // Stops within about a second: closes the listener, ends open follows with a
  // proper last chunk (kubectl logs -f exits as if the container ended), closes
  // idle connections, and joins every thread.
  virtual ~LogServer() = default;
  virtual int port() const = 0;
};

}  // namespace fulcrum::local_node
