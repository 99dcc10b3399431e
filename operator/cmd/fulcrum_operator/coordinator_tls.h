// The coordinator's TLS material, kept in one Secret that every operator replica reads, so
// trainers verify whichever replica leads against the same CA. The first replica to start
// makes the CA and the serving certificate; a later one reissues the serving certificate (same
// CA, so trainers keep trusting it) when it lacks a name trainers dial or expires within 30
// days. The CA itself is made once, for ten years.
#pragma once

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

// Secret keys: ca.crt, ca.key, tls.crt, tls.key (type kubernetes.io/tls's two and the CA's).
Result<CoordinatorTls> EnsureCoordinatorTls(kube::ApiClient& client, const std::string& ns,
                                            const std::string& name,
                                            const std::vector<std::string>& hosts);

}  // namespace fulcrum::operator_main
