#include "operator/kube/rest_client.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cpprest/http_client.h>

#include "operator/kube/api_error.h"

namespace fulcrum::kube {
namespace {

using web::http::client::http_client;
using web::http::client::http_client_config;

// Replaces the context's trust store with exactly the configured CA bundle, as
// kubectl does: a kubeconfig's CA is the only authority for that server.
Status TrustOnly(boost::asio::ssl::context& context, const std::string& ca_pem) {
  X509_STORE* store = X509_STORE_new();
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size())),
                                               BIO_free);
  int loaded = 0;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store, cert);
    X509_free(cert);
    ++loaded;
  }
  ERR_clear_error();
  SSL_CTX_set_cert_store(context.native_handle(), store);  // the context owns the store now
  if (loaded == 0) {
    return InvalidArgument("certificate-authority", "holds no PEM certificate; check the CA file or data");
  }
  return Ok();
}

Status CheckPem(const std::string& pem, const char* marker, const char* field) {
  if (pem.find(marker) == std::string::npos) {
    return InvalidArgument(field, std::string("is not PEM (no '") + marker + "' line)");
  }
  return Ok();
}

}  // namespace

struct RestClient::Impl {
  ClusterConfig config;
  RestOptions options;
  std::unique_ptr<http_client> client;
};

RestClient::RestClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RestClient::~RestClient() = default;

const ClusterConfig& RestClient::config() const { return impl_->config; }

Result<std::unique_ptr<RestClient>> RestClient::Create(const ClusterConfig& config, RestOptions options) {
  if (!config.ca_pem.empty()) {
    if (auto status = CheckPem(config.ca_pem, "-----BEGIN CERTIFICATE-----", "certificate-authority"); !status) {
      return status.error();
    }
  }
  if (!config.client_certificate_pem.empty()) {
    if (auto status = CheckPem(config.client_certificate_pem, "-----BEGIN CERTIFICATE-----", "client-certificate");
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

  http_client_config http_config;
  http_config.set_timeout(std::chrono::duration_cast<std::chrono::microseconds>(options.request_timeout));
  http_config.set_validate_certificates(!config.insecure_skip_tls_verify);
  const std::string ca = config.ca_pem;
  const std::string cert = config.client_certificate_pem;
  const std::string key = config.client_key_pem;
  http_config.set_ssl_context_callback([ca, cert, key](boost::asio::ssl::context& context) {
    if (!ca.empty()) (void)TrustOnly(context, ca);
    if (!cert.empty()) {
      context.use_certificate_chain(boost::asio::buffer(cert.data(), cert.size()));
      context.use_private_key(boost::asio::buffer(key.data(), key.size()), boost::asio::ssl::context::pem);
    }
  });
  try {
    impl->client = std::make_unique<http_client>(web::uri(config.server), http_config);
  } catch (const std::exception& e) {
    return InvalidArgument("server", "cannot use server URL '" + config.server + "': " + e.what());
  }
  return std::unique_ptr<RestClient>(new RestClient(std::move(impl)));
}

Result<nlohmann::json> RestClient::Get(std::string_view path) { return Send("GET", path, nullptr); }

Result<nlohmann::json> RestClient::Send(std::string_view method, std::string_view path, const nlohmann::json& body,
                                        std::string_view content_type) {
  const std::string description = std::string(method) + " " + std::string(path);
  web::http::http_request request{std::string(method)};
  request.set_request_uri(std::string(path));
  request.headers().add("Accept", "application/json");
  request.headers().add("User-Agent", impl_->options.user_agent);
  if (!impl_->config.bearer_token.empty()) {
    request.headers().add("Authorization", "Bearer " + impl_->config.bearer_token);
  }
  if (!body.is_null()) request.set_body(body.dump(), std::string(content_type));
  try {
    web::http::http_response response = impl_->client->request(request).get();
    const std::string text = response.extract_utf8string(true).get();
    const int status = response.status_code();
    if (status < 200 || status > 299) {
      std::string retry_after;
      if (auto it = response.headers().find("Retry-After"); it != response.headers().end()) retry_after = it->second;
      return DecodeApiFailure(status, text, retry_after, description).error;
    }
    if (text.empty()) return nlohmann::json::object();
    nlohmann::json decoded = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (decoded.is_discarded()) return MakeError(ErrorCode::kInternal, description + ": response is not JSON");
    return decoded;
  } catch (const web::http::http_exception& e) {
    // Connection refused, TLS failures (unknown CA, bad certificate) and timeouts land here.
    return MakeError(ErrorCode::kUnavailable, description + " to " + impl_->config.server + " failed: " + e.what());
  }
}

}  // namespace fulcrum::kube
