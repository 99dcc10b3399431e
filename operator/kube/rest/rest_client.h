// HTTPS requests to one API server with the configured trust and credentials:
// the transport under the typed ApiClient. Adds what client-go's rest.Client
// adds: a client-side QPS/burst limit shared by all requests, per-request
// timeouts, retry on 429/5xx that carry Retry-After, token-file rotation,
// tls-server-name, and streaming responses for watch.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>
#include <string_view>

#include "common/result.h"
#include "operator/kube/config/cluster_config.h"
#include "operator/kube/util/clock.h"

namespace fulcrum::kube {

struct RestOptions {
  std::chrono::milliseconds request_timeout{30'000};
  // A watch may be quiet for its whole timeoutSeconds (bookmarks aside), so
  // streams get their own, longer, idle timeout.
  std::chrono::milliseconds stream_idle_timeout{11 * 60'000};
  double qps = 20;  // client-side limit (controller-runtime's defaults); <= 0: unlimited
  int burst = 30;
  int max_retries = 10;  // how often to honour Retry-After on 429/5xx before giving up
  std::string user_agent = "fulcrum/0.1";
  std::shared_ptr<const Clock> clock = SystemClock();
};

struct HttpRequest {
  std::string method = "GET";
  std::string path;  // absolute API path with query, e.g. "/api/v1/nodes?limit=500"
  std::string body;
  std::string content_type = "application/json";
  // Media types the caller can read, in order of preference.
  std::string accept = "application/json";
  // Ask for a gzip-compressed body (decompressed before the caller sees it). For lists: the API
  // server compresses responses over 128 KiB, and its streamed list encodings come in ~2 KiB
  // HTTP chunks, each a round of work for the HTTP client, so 10,000 pods in protobuf arrive
  // in 0.2 s instead of 0.5 s. Watches are never compressed.
  bool compressed = false;
  // When requested, the request is abandoned wherever it is: waiting for a
  // client-side rate-limit token, sleeping for a Retry-After, waiting for the
  // response, or (for Stream) while its body is read. It then fails with
  // kDeadlineExceeded saying so. What client-go gets from the request's context.
  std::stop_token stop{};
};

// The body of a streaming response (watch), read as it arrives.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // Blocks until `at_least` bytes have arrived (or the response ended);
  // returns what has arrived, at most `max`. An empty string means the server
  // ended the response. An error means the connection broke or the stream was
  // cancelled. Watches read with at_least = 1, so every event is seen as soon
  // as it arrives; bulk reads ask for more, to wake up less often.
  virtual Result<std::string> ReadSome(std::size_t max, std::size_t at_least = 1) = 0;
  // Callable from any thread: aborts the connection so ReadSome returns.
  virtual void Cancel() = 0;
  // The response's media type (Content-Type without parameters).
  virtual std::string media_type() const { return "application/json"; }
};

class RestClient {
 public:
  // Fails if the TLS material in `config` cannot be loaded (the message says which).
  static Result<std::unique_ptr<RestClient>> Create(const ClusterConfig& config,
                                                    RestOptions options = {});
  ~RestClient();
  RestClient(const RestClient&) = delete;
  RestClient& operator=(const RestClient&) = delete;

  // JSON in, JSON out. A null `body` sends none.
  Result<nlohmann::json> Get(std::string_view path);
  Result<nlohmann::json> Send(std::string_view method, std::string_view path,
                              const nlohmann::json& body,
                              std::string_view content_type = "application/json");
  // The raw response body of a 2xx answer; typed Error otherwise.
  Result<std::string> Do(const HttpRequest& request);
  // Opens a streaming response. Errors (including non-2xx) come back here;
  // the caller then reads the stream until it ends.
  Result<std::unique_ptr<ResponseStream>> Stream(const HttpRequest& request);

  const ClusterConfig& config() const;
  const RestOptions& options() const;

 private:
  struct Impl;
  explicit RestClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fulcrum::kube
