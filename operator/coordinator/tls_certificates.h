// The coordinator's own certificate authority: a CA made once (kept by the operator in a
// Secret, shared by its replicas) and a serving certificate it signs for the names trainers
// dial. Trainers verify the coordinator against the CA, so the job token never crosses the
// network in the clear. PEM in, PEM out; the operator stores them, gRPC serves them.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/result.h"

namespace fulcrum::coordinator {

struct PemKeyPair {
  std::string certificate;  // PEM "CERTIFICATE"
  std::string private_key;  // PEM "PRIVATE KEY" (PKCS#8)
};

// A self-signed CA (ECDSA P-256, SHA-256), valid from an hour ago for `lifetime`.
Result<PemKeyPair> MakeCertificateAuthority(const std::string& common_name,
                                            std::chrono::hours lifetime);

// A serving certificate signed by `ca` for `hosts`: each an IP address (an IP SAN) or a DNS
// name (a DNS SAN). At least one host; the first is also the subject's common name.
Result<PemKeyPair> IssueServingCertificate(const PemKeyPair& ca,
                                           const std::vector<std::string>& hosts,
                                           std::chrono::hours lifetime);

// The DNS and IP subject alternative names of a PEM certificate, as text; and whether it is
// still valid `margin` from now (to renew before it expires).
Result<std::vector<std::string>> SubjectAltNames(const std::string& certificate_pem);
Result<bool> ValidFor(const std::string& certificate_pem, std::chrono::hours margin);

}  // namespace fulcrum::coordinator
