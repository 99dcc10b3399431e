// Plain HTTP endpoints: /healthz and /readyz for the kubelet's probes, and /metrics for
// Prometheus. One server serves whichever of them it is given, so fulcrum-operator can run one
// on its health address and one on its metrics address, or one for both; fulcrum-trainer runs a
// metrics-only one. (Not prometheus-cpp's Exposer: its civetweb asks for 100 KiB thread stacks,
// which glibc refuses in a process whose static TLS is larger, as the trainer's is with
// libtorch, OpenBLAS and glog loaded: 110 KiB. The Exposer then failed to start.)
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/result.h"

namespace fulcrum {

// An empty function leaves its path unserved (404), e.g. probes on a metrics-only server.
struct Probes {
  std::function<Status()> healthy;  // GET /healthz: 200 "ok", or 500 with the error's message
  std::function<Status()> ready;    // GET /readyz: the same
};

class HttpEndpoints {
 public:
  // Listens on `listen`, "host:port" (empty host: every interface; port 0: any free port, see
  // port()). GET /metrics answers metrics_text() as the Prometheus text format; other paths are
  // 404 and other methods 405. The functions are called from the server's threads, possibly at
  // once, and must be thread-safe. Errors (a malformed address, a port in use) name
  // `setting_name`, the flag or key the address came from.
  static Result<std::unique_ptr<HttpEndpoints>> Start(const std::string& listen, Probes probes,
                                                      std::function<std::string()> metrics_text,
                                                      const std::string& setting_name);
  ~HttpEndpoints();  // stops listening
  HttpEndpoints(const HttpEndpoints&) = delete;
  HttpEndpoints& operator=(const HttpEndpoints&) = delete;

  int port() const;  // the bound port, also when `listen` asked for 0

 private:
  struct Impl;
  explicit HttpEndpoints(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fulcrum
