// The coordinator's TLS material, kept in one Secret that every operator replica reads, so
// trainers verify whichever replica leads against the same CA. The first replica to start
// makes the CA and the serving certificate; a later one reissues the serving certificate (same
// CA, so trainers keep trusting it) when it lacks a name trainers dial or expires within 30
// days. The CA itself is made once, for ten years.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "operator/coordinator/tls_certificates.h"
#include "operator/kube/client/api_client.h"

namespace fulcrum::operator_main {

struct CoordinatorTls {
  coordinator::PemKeyPair serving;  // what the coordinator serves
  std::string ca_certificate;       // what trainers verify it against
};

// What a stored Secret (ca.crt, tls.crt, tls.key, and ca.key when the operator made it) gives
// for serving `hosts`: its certificate as it is; nullopt when the operator made it and should
// reissue the serving certificate (a host missing, or expiring within 30 days); an error when
// it is managed elsewhere (no ca.key: cert-manager's Certificate writes such Secrets) and does
// not serve, or lacks a key.
Result<std::optional<CoordinatorTls>> StoredCoordinatorTls(const nlohmann::json& secret,
                                                           const std::vector<std::string>& hosts);

// Secret keys: ca.crt, ca.key, tls.crt, tls.key (type kubernetes.io/tls's two and the CA's).
Result<CoordinatorTls> EnsureCoordinatorTls(kube::ApiClient& client, const std::string& ns,
                                            const std::string& name,
                                            const std::vector<std::string>& hosts);

}  // namespace fulcrum::operator_main
