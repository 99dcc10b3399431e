#include "operator/cmd/fulcrum_operator/coordinator_tls.h"

#include <absl/strings/escaping.h>

#include <algorithm>

#include "common/log.h"

namespace fulcrum::operator_main {
namespace {

using namespace std::chrono_literals;

constexpr auto kCaLifetime = 24h * 3650;
constexpr auto kServingLifetime = 24h * 365;
constexpr auto kRenewMargin = 24h * 30;
constexpr int kAttempts = 5;  // replicas racing on the Secret: each loss re-reads it

std::string Decoded(const nlohmann::json& secret, const char* key) {
  std::string value;
  const nlohmann::json& data = secret.contains("data") ? secret["data"] : nlohmann::json::object();
  if (data.contains(key) && data[key].is_string()) {
    absl::Base64Unescape(std::string(data[key].get<std::string>()), &value);
  }
  return value;
}

void Encode(nlohmann::json& secret, const coordinator::PemKeyPair& ca,
            const coordinator::PemKeyPair& serving) {
  secret["type"] = "Opaque";
  secret["data"] = {{"ca.crt", absl::Base64Escape(ca.certificate)},
                    {"ca.key", absl::Base64Escape(ca.private_key)},
                    {"tls.crt", absl::Base64Escape(serving.certificate)},
                    {"tls.key", absl::Base64Escape(serving.private_key)}};
}

// Whether `serving` still serves: names every host and is valid a month from now.
bool StillServes(const coordinator::PemKeyPair& serving, const std::vector<std::string>& hosts) {
  const Result<std::vector<std::string>> names = coordinator::SubjectAltNames(serving.certificate);
  const Result<bool> valid = coordinator::ValidFor(serving.certificate, kRenewMargin);
  if (!names.ok() || !valid.ok() || !*valid) return false;
  return std::all_of(hosts.begin(), hosts.end(), [&](const std::string& host) {
    return std::find(names->begin(), names->end(), host) != names->end();
  });
}

}  // namespace

Result<std::optional<CoordinatorTls>> StoredCoordinatorTls(const nlohmann::json& secret,
                                                           const std::vector<std::string>& hosts) {
  const std::string name =
      secret.contains("metadata")
          ? secret["metadata"].value("namespace", "") + "/" + secret["metadata"].value("name", "")
          : "the TLS Secret";
  const coordinator::PemKeyPair serving{Decoded(secret, "tls.crt"), Decoded(secret, "tls.key")};
  const std::string ca_certificate = Decoded(secret, "ca.crt");
  const bool made_here = !Decoded(secret, "ca.key").empty();
  if (ca_certificate.empty() ||
      (!made_here && (serving.certificate.empty() || serving.private_key.empty()))) {
    return Error{ErrorCode::kFailedPrecondition,
                 "Secret " + name +
                     " needs ca.crt, tls.crt and tls.key (and ca.key when the operator makes "
                     "it): delete it and the operator makes a new CA (running trainers then "
                     "need new pods), or fix its issuer",
                 "coordinator.tlsSecret"};
  }
  if (StillServes(serving, hosts)) {
    return std::optional<CoordinatorTls>(CoordinatorTls{serving, ca_certificate});
  }
  if (made_here) return std::optional<CoordinatorTls>();  // reissue from its CA
  return Error{ErrorCode::kFailedPrecondition,
               "Secret " + name +
                   " is managed elsewhere (no ca.key) and its certificate does not name every "
                   "host trainers dial or expires within 30 days; have its issuer add or renew it",
               "coordinator.tlsSecret"};
}

Result<CoordinatorTls> EnsureCoordinatorTls(kube::ApiClient& client, const std::string& ns,
                                            const std::string& name,
                                            const std::vector<std::string>& hosts) {
  const kube::ResourceType secrets = kube::resources::Secrets();
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    Result<nlohmann::json> stored = client.Get(secrets, ns, name);
    if (!stored.ok() && stored.error().code != ErrorCode::kNotFound) return stored.error();
    if (!stored.ok()) {
      Result<coordinator::PemKeyPair> ca =
          coordinator::MakeCertificateAuthority("fulcrum-coordinator-ca", kCaLifetime);
      if (!ca.ok()) return ca.error();
      Result<coordinator::PemKeyPair> serving =
          coordinator::IssueServingCertificate(*ca, hosts, kServingLifetime);
      if (!serving.ok()) return serving.error();
      nlohmann::json secret = {
          {"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata",
           {{"name", name},
            {"namespace", ns},
            {"labels", {{"app.kubernetes.io/managed-by", "fulcrum-operator"}}}}}};
      Encode(secret, *ca, *serving);
      Result<nlohmann::json> created = client.Create(secrets, ns, secret);
      if (created.ok()) {
        log::Info("operator", "", "made the coordinator's CA and serving certificate",
                  {{"secret", ns + "/" + name}, {"hosts", hosts}});
        return CoordinatorTls{*serving, ca->certificate};
      }
      if (created.error().code != ErrorCode::kAlreadyExists) return created.error();
      continue;  // another replica made it first: use theirs
    }
    Result<std::optional<CoordinatorTls>> usable = StoredCoordinatorTls(*stored, hosts);
    if (!usable.ok()) return usable.error();
    if (*usable) return **usable;
    const coordinator::PemKeyPair ca{Decoded(*stored, "ca.crt"), Decoded(*stored, "ca.key")};
    Result<coordinator::PemKeyPair> reissued =
        coordinator::IssueServingCertificate(ca, hosts, kServingLifetime);
    if (!reissued.ok()) return reissued.error();
    Encode(*stored, ca, *reissued);
    Result<nlohmann::json> updated = client.Update(secrets, ns, *stored);
    if (updated.ok()) {
      log::Info("operator", "", "reissued the coordinator's serving certificate",
                {{"secret", ns + "/" + name}, {"hosts", hosts}});
      return CoordinatorTls{*reissued, ca.certificate};
    }
    if (updated.error().code != ErrorCode::kConflict) return updated.error();
  }
  return Error{ErrorCode::kConflict,
               "Secret " + ns + "/" + name + " kept changing while being read; retry",
               "coordinator.tlsSecret"};
}

}  // namespace fulcrum::operator_main
