#include "operator/kube/rest/rest_client.h"

#include <cpprest/http_client.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "common/log.h"
#include "operator/kube/rest/api_error.h"
#include "operator/kube/rest/bearer_token_source.h"
#include "operator/kube/util/clocked_token_bucket.h"

namespace fulcrum::kube {
namespace {

using web::http::client::http_client;
using web::http::client::http_client_config;

// Replaces the context's trust store with exactly the configured CA bundle, as
// kubectl does: a kubeconfig's CA is the only authority for that server.
Status TrustOnly(boost::asio::ssl::context& context, const std::string& ca_pem) {
  X509_STORE* store = X509_STORE_new();
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size())), BIO_free);
  int loaded = 0;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store, cert);
    X509_free(cert);
    ++loaded;
  }
  ERR_clear_error();
  SSL_CTX_set_cert_store(context.native_handle(), store);  // the context owns the store now
  if (loaded == 0) {
    return InvalidArgument("certificate-authority",
                           "holds no PEM certificate; check the CA file or data");
  }
  return Ok();
}

Status CheckPem(const std::string& pem, const char* marker, const char* field) {
  if (pem.find(marker) == std::string::npos) {
    return InvalidArgument(field, std::string("is not PEM (no '") + marker + "' line)");
  }
  return Ok();
}

// Transport failures: connection refused, TLS, timeouts. The message says
// which server and, for TLS, which setting to check.
Error TransportError(const web::http::http_exception& e, const std::string& description,
                     const ClusterConfig& config) {
  const std::string what = e.what();
  if (e.error_code() == std::errc::timed_out) {
    return MakeError(ErrorCode::kDeadlineExceeded,
                     description + " to " + config.server + " timed out: " + what);
  }
  const bool tls = what.find("handshake") != std::string::npos ||
                   what.find("certificate") != std::string::npos ||
                   what.find("SSL") != std::string::npos;
  if (tls) {
    return MakeError(ErrorCode::kUnavailable,
                     description + " to " + config.server + ": TLS handshake failed: " + what +
                         " (the server's certificate is not trusted by certificate-authority, or "
                         "does not match the host or tls-server-name, in " +
                         config.source + ")");
  }
  return MakeError(ErrorCode::kUnavailable,
                   description + " to " + config.server + " failed: " + what);
}

class CpprestResponseStream final : public ResponseStream {
 public:
  CpprestResponseStream(web::http::http_response response,
                        std::shared_ptr<pplx::cancellation_token_source> cancel,
                        std::stop_token stop)
      : response_(std::move(response)),
        body_(response_.body()),
        cancel_(std::move(cancel)),
        // A stop requested while the body is read aborts the read.
        on_stop_(std::move(stop), [cancel = cancel_] { cancel->cancel(); }) {}
  ~CpprestResponseStream() override { Cancel(); }

  Result<std::string> ReadSome(std::size_t max, std::size_t at_least) override {
    auto buffer = body_.streambuf();
    // Take whatever has arrived if it is enough; otherwise wait for
    // `at_least` bytes (getn returns early at the end of the response).
    const std::size_t available =
        static_cast<std::size_t>(std::max<std::streamsize>(0, buffer.in_avail()));
    const std::size_t wanted = std::min(max, std::max<std::size_t>(1, at_least));
    std::string chunk(available >= wanted ? std::min(available, max) : wanted, '\0');
    try {
      const std::size_t got =
          buffer.getn(reinterpret_cast<uint8_t*>(chunk.data()), chunk.size()).get();
      chunk.resize(got);
      return chunk;
    } catch (const std::exception& e) {
      return MakeError(cancel_->get_token().is_canceled() ? ErrorCode::kDeadlineExceeded
                                                          : ErrorCode::kUnavailable,
                       std::string("response stream broke: ") + e.what());
    }
  }

  void Cancel() override { cancel_->cancel(); }

  std::string media_type() const override {
    const std::string type = response_.headers().content_type();
    return type.substr(0, type.find(';'));
  }

 private:
  web::http::http_response response_;
  concurrency::streams::istream body_;
  std::shared_ptr<pplx::cancellation_token_source> cancel_;
  std::stop_callback<std::function<void()>> on_stop_;
};

Error Abandoned(const HttpRequest& request) {
  return MakeError(ErrorCode::kDeadlineExceeded,
                   request.method + " " + request.path + ": abandoned: stop requested");
}

}  // namespace

struct RestClient::Impl {
  ClusterConfig config;
  RestOptions options;
  std::unique_ptr<http_client> client;         // ordinary requests
  std::unique_ptr<http_client> stream_client;  // watches: long idle timeout
  std::unique_ptr<BearerTokenSource> token;
  std::unique_ptr<ClockedTokenBucket> limiter;
  log::Logger log{"kube.rest"};

  web::http::http_request Build(const HttpRequest& request) {
    web::http::http_request http{request.method};
    http.set_request_uri(request.path);
    http.headers().add("Accept", request.accept);
    if (request.compressed) http.headers().add("Accept-Encoding", "gzip");
    http.headers().add("User-Agent", options.user_agent);
    // cpprestsdk verifies the certificate and sends SNI for the Host header's
    // name, so this is how tls-server-name takes effect.
    if (!config.tls_server_name.empty()) http.headers().add("Host", config.tls_server_name);
    if (const std::string bearer = token->Current(); !bearer.empty()) {
      http.headers().add("Authorization", "Bearer " + bearer);
    }
    if (!request.body.empty()) http.set_body(request.body, request.content_type);
    return http;
  }

  // One round trip. A 2xx response, or the typed error; API errors also fill
  // `failure`, which carries Retry-After.
  Result<web::http::http_response> Exchange(http_client& http, const HttpRequest& request,
                                            const pplx::cancellation_token& cancel,
                                            std::optional<ApiFailure>& failure) {
    const std::string description = request.method + " " + request.path;
    try {
      // Completes once the headers are in; the body may still be arriving.
      web::http::http_response response = http.request(Build(request), cancel).get();
      const int status = response.status_code();
      if (status >= 200 && status <= 299) return response;
      const std::string text = response.extract_utf8string(true).get();
      std::string retry_after;
      if (auto it = response.headers().find("Retry-After"); it != response.headers().end()) {
        retry_after = it->second;
      }
      failure = DecodeApiFailure(status, text, retry_after, description);
      return failure->error;
    } catch (const web::http::http_exception& e) {
      return TransportError(e, description, config);
    } catch (const std::exception& e) {
      // E.g. TLS material that OpenSSL rejects while setting up the connection.
      return MakeError(ErrorCode::kUnavailable,
                       description + " to " + config.server + " failed: " + e.what());
    }
  }

  // Exchange under the client-side rate limit, retrying while the server asks
  // for it with Retry-After (429, or 5xx during overload), as client-go does.
  // A stop requested (request.stop) cancels `cancel` and ends every wait.
  Result<web::http::http_response> ExchangeWithRetries(
      http_client& http, const HttpRequest& request,
      const std::shared_ptr<pplx::cancellation_token_source>& cancel) {
    std::stop_callback on_stop(request.stop, [&cancel] { cancel->cancel(); });
    for (int retry = 0;; ++retry) {
      if (!limiter->Accept(request.stop)) return Abandoned(request);
      std::optional<ApiFailure> failure;
      auto result = Exchange(http, request, cancel->get_token(), failure);
      if (request.stop.stop_requested()) return Abandoned(request);
      if (result.ok() || retry >= options.max_retries || !failure || !failure->retry_after ||
          (failure->http_status != 429 && failure->http_status < 500)) {
        return result;
      }
      const auto wait =
          std::max<std::chrono::seconds>(std::chrono::seconds(1), *failure->retry_after);
      log.Info("server asked to retry later", {{"request", request.method + " " + request.path},
                                               {"status", failure->http_status},
                                               {"retry_after_seconds", wait.count()},
                                               {"attempt", retry + 1}});
      if (!options.clock->SleepFor(wait, request.stop)) return Abandoned(request);
    }
  }
};

RestClient::RestClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RestClient::~RestClient() = default;

const ClusterConfig& RestClient::config() const {
  return impl_->config;
}
const RestOptions& RestClient::options() const {
  return impl_->options;
}

Result<std::unique_ptr<RestClient>> RestClient::Create(const ClusterConfig& config,
                                                       RestOptions options) {
  if (!config.ca_pem.empty()) {
    if (auto status =
            CheckPem(config.ca_pem, "-----BEGIN CERTIFICATE-----", "certificate-authority");
        !status) {
      return status.error();
    }
  }
  if (!config.client_certificate_pem.empty()) {
    if (auto status = CheckPem(config.client_certificate_pem, "-----BEGIN CERTIFICATE-----",
                               "client-certificate");
        !status) {
      return status.error();
    }
    if (auto status = CheckPem(config.client_key_pem, "PRIVATE KEY-----", "client-key"); !status) {
      return status.error();
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->options = options;
  impl->token = std::make_unique<BearerTokenSource>(config.bearer_token, config.bearer_token_file);
  impl->limiter = std::make_unique<ClockedTokenBucket>(options.qps, options.burst, options.clock);

  auto make_client = [&](std::chrono::milliseconds timeout) {
    http_client_config http_config;
    http_config.set_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
    // Decompress gzip bodies (asked for with HttpRequest::compressed).
    http_config.set_request_compressed_response(true);
    http_config.set_validate_certificates(!config.insecure_skip_tls_verify);
    const std::string ca = config.ca_pem;
    const std::string cert = config.client_certificate_pem;
    const std::string key = config.client_key_pem;
    http_config.set_ssl_context_callback([ca, cert, key](boost::asio::ssl::context& context) {
      if (!ca.empty()) (void)TrustOnly(context, ca);
      if (!cert.empty()) {
        context.use_certificate_chain(boost::asio::buffer(cert.data(), cert.size()));
        context.use_private_key(boost::asio::buffer(key.data(), key.size()),
                                boost::asio::ssl::context::pem);
      }
    });
    return std::make_unique<http_client>(web::uri(config.server), http_config);
  };
  try {
    impl->client = make_client(options.request_timeout);
    impl->stream_client = make_client(options.stream_idle_timeout);
  } catch (const std::exception& e) {
    return InvalidArgument("server", "cannot use server URL '" + config.server + "': " + e.what());
  }
  return std::unique_ptr<RestClient>(new RestClient(std::move(impl)));
}

Result<nlohmann::json> RestClient::Get(std::string_view path) {
  return Send("GET", path, nullptr);
}

Result<nlohmann::json> RestClient::Send(std::string_view method, std::string_view path,
                                        const nlohmann::json& body, std::string_view content_type) {
  HttpRequest request{std::string(method), std::string(path),
                      body.is_null() ? std::string() : body.dump(), std::string(content_type)};
  auto text = Do(request);
  if (!text.ok()) return text.error();
  if (text->empty()) return nlohmann::json::object();
  nlohmann::json decoded = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (decoded.is_discarded()) {
    return MakeError(ErrorCode::kInternal,
                     request.method + " " + request.path + ": response is not JSON");
  }
  return decoded;
}

Result<std::string> RestClient::Do(const HttpRequest& request) {
  auto cancel = std::make_shared<pplx::cancellation_token_source>();
  auto response = impl_->ExchangeWithRetries(*impl_->client, request, cancel);
  if (!response.ok()) return response.error();
  // The body may still be arriving: a stop aborts that too.
  std::stop_callback on_stop(request.stop, [&cancel] { cancel->cancel(); });
  try {
    return response->extract_utf8string(true).get();
  } catch (const web::http::http_exception& e) {
    if (request.stop.stop_requested()) return Abandoned(request);
    return TransportError(e, request.method + " " + request.path, impl_->config);
  } catch (const std::exception& e) {
    if (request.stop.stop_requested()) return Abandoned(request);
    return MakeError(ErrorCode::kUnavailable,
                     request.method + " " + request.path + ": reading the response: " + e.what());
  }
}

Result<std::unique_ptr<ResponseStream>> RestClient::Stream(const HttpRequest& request) {
  auto cancel = std::make_shared<pplx::cancellation_token_source>();
  auto response = impl_->ExchangeWithRetries(*impl_->stream_client, request, cancel);
  if (!response.ok()) return response.error();
  return std::unique_ptr<ResponseStream>(std::make_unique<CpprestResponseStream>(
      std::move(response).value(), std::move(cancel), request.stop));
}

}  // namespace fulcrum::kube
