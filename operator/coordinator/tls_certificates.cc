#include "operator/coordinator/tls_certificates.h"

#include <arpa/inet.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <array>
#include <ctime>
#include <memory>

namespace fulcrum::coordinator {
namespace {

// OpenSSL's objects, freed by their own functions.
template <auto Free>
struct Deleter {
  template <typename T>
  void operator()(T* pointer) const {
    Free(pointer);
  }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using Certificate = std::unique_ptr<X509, Deleter<X509_free>>;
using Extension = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;
using BigNumber = std::unique_ptr<BIGNUM, Deleter<BN_free>>;
using Names = std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES_free>>;

// The failure, with OpenSSL's own reason when it left one.
Error Failed(const std::string& what) {
  std::string message = what;
  if (const unsigned long code = ERR_get_error(); code != 0) {
    std::array<char, 256> reason{};
    ERR_error_string_n(code, reason.data(), reason.size());
    message += ": " + std::string(reason.data());
  }
  ERR_clear_error();
  return Error{ErrorCode::kInternal, message, "tls"};
}

bool IsIpAddress(const std::string& host) {
  std::array<unsigned char, 16> address{};
  return inet_pton(AF_INET, host.c_str(), address.data()) == 1 ||
         inet_pton(AF_INET6, host.c_str(), address.data()) == 1;
}

Result<std::string> ToPem(X509* certificate) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), certificate) != 1) return Failed("writing PEM");
  BUF_MEM* memory = nullptr;
  BIO_get_mem_ptr(bio.get(), &memory);
  return std::string(memory->data, memory->length);
}

Result<std::string> ToPem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Failed("writing PEM");
  }
  BUF_MEM* memory = nullptr;
  BIO_get_mem_ptr(bio.get(), &memory);
  return std::string(memory->data, memory->length);
}

Result<Certificate> ReadCertificate(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Certificate certificate(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!certificate) return Failed("not a PEM certificate");
  return certificate;
}

Result<Key> ReadKey(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) return Failed("not a PEM private key");
  return key;
}

Status AddExtension(X509* certificate, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, issuer, certificate, nullptr, nullptr, 0);
  Extension extension(X509V3_EXT_conf_nid(nullptr, &context, nid, value.c_str()));
  if (!extension || X509_add_ext(certificate, extension.get(), -1) != 1) {
    return Failed("certificate extension " + value);
  }
  return Ok();
}

// A new certificate for `key`, named `common_name`, valid from an hour ago (clocks differ) for
// `lifetime`, with a random 127-bit serial; not yet signed.
Result<Certificate> NewCertificate(EVP_PKEY* key, const std::string& common_name,
                                   std::chrono::hours lifetime) {
  Certificate certificate(X509_new());
  BigNumber serial(BN_new());
  if (!certificate || !serial || X509_set_version(certificate.get(), X509_VERSION_3) != 1 ||
      BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(certificate.get())) == nullptr ||
      X509_gmtime_adj(X509_getm_notBefore(certificate.get()), -3600) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(certificate.get()),
                      std::chrono::duration_cast<std::chrono::seconds>(lifetime).count()) ==
          nullptr ||
      X509_set_pubkey(certificate.get(), key) != 1 ||
      X509_NAME_add_entry_by_txt(X509_get_subject_name(certificate.get()), "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                                 -1, 0) != 1) {
    return Failed("building a certificate");
  }
  return certificate;
}

}  // namespace

Result<PemKeyPair> MakeCertificateAuthority(const std::string& common_name,
                                            std::chrono::hours lifetime) {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return Failed("generating a P-256 key");
  Result<Certificate> certificate = NewCertificate(key.get(), common_name, lifetime);
  if (!certificate.ok()) return certificate.error();
  X509* ca = certificate->get();
  if (X509_set_issuer_name(ca, X509_get_subject_name(ca)) != 1) return Failed("issuer");
  for (const auto& [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                                   std::pair{NID_key_usage, "critical,keyCertSign,cRLSign"},
                                   std::pair{NID_subject_key_identifier, "hash"}}) {
    if (Status status = AddExtension(ca, ca, nid, value); !status.ok()) return status.error();
  }
  if (X509_sign(ca, key.get(), EVP_sha256()) == 0) return Failed("signing the CA");
  Result<std::string> certificate_pem = ToPem(ca);
  if (!certificate_pem.ok()) return certificate_pem.error();
  Result<std::string> key_pem = ToPem(key.get());
  if (!key_pem.ok()) return key_pem.error();
  return PemKeyPair{*certificate_pem, *key_pem};
}

Result<PemKeyPair> IssueServingCertificate(const PemKeyPair& ca,
                                           const std::vector<std::string>& hosts,
                                           std::chrono::hours lifetime) {
  if (hosts.empty()) return InvalidArgument("hosts", "name at least one DNS name or IP address");
  std::string alt_names;
  for (const std::string& host : hosts) {
    // The SAN list is comma-separated text: a comma or a space in a host would change it.
    if (host.empty() || host.find_first_of(", \t\n") != std::string::npos) {
      return InvalidArgument("hosts", "\"" + host + "\" is not a DNS name or IP address");
    }
    alt_names +=
        (alt_names.empty() ? "" : ",") + std::string(IsIpAddress(host) ? "IP:" : "DNS:") + host;
  }
  Result<Certificate> issuer = ReadCertificate(ca.certificate);
  if (!issuer.ok()) return issuer.error();
  Result<Key> issuer_key = ReadKey(ca.private_key);
  if (!issuer_key.ok()) return issuer_key.error();
  Key key(EVP_EC_gen("P-256"));
  if (!key) return Failed("generating a P-256 key");
  Result<Certificate> certificate = NewCertificate(key.get(), hosts.front(), lifetime);
  if (!certificate.ok()) return certificate.error();
  X509* serving = certificate->get();
  if (X509_set_issuer_name(serving, X509_get_subject_name(issuer->get())) != 1) {
    return Failed("issuer");
  }
  for (const auto& [nid, value] :
       {std::pair{NID_basic_constraints, std::string("critical,CA:FALSE")},
        std::pair{NID_key_usage, std::string("critical,digitalSignature,keyEncipherment")},
        std::pair{NID_ext_key_usage, std::string("serverAuth")},
        std::pair{NID_authority_key_identifier, std::string("keyid:always")},
        std::pair{NID_subject_alt_name, alt_names}}) {
    if (Status status = AddExtension(serving, issuer->get(), nid, value); !status.ok()) {
      return status.error();
    }
  }
  if (X509_sign(serving, issuer_key->get(), EVP_sha256()) == 0) return Failed("signing");
  Result<std::string> certificate_pem = ToPem(serving);
  if (!certificate_pem.ok()) return certificate_pem.error();
  Result<std::string> key_pem = ToPem(key.get());
  if (!key_pem.ok()) return key_pem.error();
  return PemKeyPair{*certificate_pem, *key_pem};
}

Result<std::vector<std::string>> SubjectAltNames(const std::string& certificate_pem) {
  Result<Certificate> certificate = ReadCertificate(certificate_pem);
  if (!certificate.ok()) return certificate.error();
  Names names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(certificate->get(), NID_subject_alt_name, nullptr, nullptr)));
  std::vector<std::string> hosts;
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    if (name->type == GEN_DNS) {
      const ASN1_STRING* dns = name->d.dNSName;
      hosts.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                         static_cast<std::size_t>(ASN1_STRING_length(dns)));
    } else if (name->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = name->d.iPAddress;
      std::array<char, INET6_ADDRSTRLEN> text{};
      const int family = ASN1_STRING_length(ip) == 4 ? AF_INET : AF_INET6;
      if (inet_ntop(family, ASN1_STRING_get0_data(ip), text.data(), text.size()) != nullptr) {
        hosts.emplace_back(text.data());
      }
    }
  }
  return hosts;
}

Result<bool> ValidFor(const std::string& certificate_pem, std::chrono::hours margin) {
  Result<Certificate> certificate = ReadCertificate(certificate_pem);
  if (!certificate.ok()) return certificate.error();
  std::time_t now = std::time(nullptr);
  std::time_t until = now + std::chrono::duration_cast<std::chrono::seconds>(margin).count();
  return X509_cmp_time(X509_get0_notBefore(certificate->get()), &now) < 0 &&
         X509_cmp_time(X509_get0_notAfter(certificate->get()), &until) > 0;
}

}  // namespace fulcrum::coordinator
