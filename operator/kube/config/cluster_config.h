// Everything a client needs to reach and trust one API server, however it was
// configured (kubeconfig file or in-cluster service account). Plain data.
#pragma once

#include <filesystem>
#include <string>

namespace fulcrum::kube {

struct ClusterConfig {
  std::string server;           // https://host:port, no trailing slash
  std::string ca_pem;           // CA bundle to trust; empty means the system roots
  std::string tls_server_name;  // name to verify the serving certificate against, if not the host
  bool insecure_skip_tls_verify = false;

  std::string bearer_token;                 // static token, or the last read of token_file
  std::filesystem::path bearer_token_file;  // re-read when it changes (token rotation)
  std::string client_certificate_pem;       // client-certificate authentication
  std::string client_key_pem;

  std::string default_namespace = "default";
  std::string source;  // where this came from, for error messages ("kubeconfig /x context y")
};

}  // namespace fulcrum::kube
