#include "operator/kube/config/kubeconfig.h"

#include <absl/strings/escaping.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "operator/kube/rest/bearer_token_source.h"

namespace fulcrum::kube {
namespace {

namespace fs = std::filesystem;

Result<std::string> ReadWholeFile(const fs::path& path, const std::string& field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgument(
        field, "cannot read file '" + path.string() + "'; check that it exists and is readable");
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

Result<std::string> DecodeBase64(const std::string& text, const std::string& field) {
  std::string bytes;
  if (!absl::Base64Unescape(text, &bytes)) {
    return InvalidArgument(field, "is not valid base64; paste the PEM file through `base64 -w0`");
  }
  return bytes;
}

// A named entry (clusters[], users[], contexts[]) of a kubeconfig.
std::optional<YAML::Node> FindNamed(const YAML::Node& list, const std::string& name) {
  if (!list || !list.IsSequence()) return std::nullopt;
  for (const auto& entry : list) {
    if (entry["name"] && entry["name"].as<std::string>("") == name) return entry;
  }
  return std::nullopt;
}

std::string Names(const YAML::Node& list) {
  std::string names;
  if (!list || !list.IsSequence()) return "none";
  for (const auto& entry : list) {
    if (!names.empty()) names += ", ";
    names += entry["name"].as<std::string>("?");
  }
  return names.empty() ? "none" : names;
}

// Inline data wins over a file, as in kubectl. Relative files resolve against `base`.
Result<std::string> DataOrFile(const YAML::Node& section, const std::string& key,
                               const fs::path& base, const std::string& field_prefix) {
  if (section[key + "-data"]) {
    return DecodeBase64(section[key + "-data"].as<std::string>(""),
                        field_prefix + "." + key + "-data");
  }
  if (section[key]) {
    fs::path path = section[key].as<std::string>("");
    if (path.is_relative()) path = base / path;
    return ReadWholeFile(path, field_prefix + "." + key);
  }
  return std::string{};
}

Result<ClusterConfig> ParseKubeconfig(const YAML::Node& root, const fs::path& file,
                                      std::string_view wanted) {
  const std::string where = "kubeconfig " + file.string();
  auto error = [&](const std::string& field, const std::string& message) -> Error {
    return InvalidArgument(field, where + ": " + message);
  };
  if (!root || !root.IsMap()) return error("(file)", "is empty or not a YAML mapping");

  std::string context_name(wanted);
  if (context_name.empty()) context_name = root["current-context"].as<std::string>("");
  if (context_name.empty()) {
    return error("current-context", "is not set and no context was given; pass --context (have: " +
                                        Names(root["contexts"]) + ")");
  }
  const auto context_entry = FindNamed(root["contexts"], context_name);
  if (!context_entry) {
    return error("contexts", "has no context named '" + context_name +
                                 "' (have: " + Names(root["contexts"]) + ")");
  }
  const YAML::Node context = (*context_entry)["context"];
  const std::string context_field = "contexts[" + context_name + "].context";
  if (!context || !context["cluster"]) return error(context_field + ".cluster", "is missing");

  ClusterConfig config;
  config.source = where + " context " + context_name;
  const fs::path base = file.has_parent_path() ? file.parent_path() : fs::path(".");

  const std::string cluster_name = context["cluster"].as<std::string>("");
  const auto cluster_entry = FindNamed(root["clusters"], cluster_name);
  if (!cluster_entry || !(*cluster_entry)["cluster"]) {
    return error(context_field + ".cluster",
                 "names cluster '" + cluster_name +
                     "', which is not in clusters (have: " + Names(root["clusters"]) + ")");
  }
  const YAML::Node cluster = (*cluster_entry)["cluster"];
  const std::string cluster_field = "clusters[" + cluster_name + "].cluster";
  config.server = cluster["server"].as<std::string>("");
  if (config.server.rfind("https://", 0) != 0 && config.server.rfind("http://", 0) != 0) {
    return error(cluster_field + ".server",
                 "must be a URL like https://host:6443, got '" + config.server + "'");
  }
  while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
  auto ca = DataOrFile(cluster, "certificate-authority", base, cluster_field);
  if (!ca) return error(ca.error().field, ca.error().message);
  config.ca_pem = *ca;
  config.tls_server_name = cluster["tls-server-name"].as<std::string>("");
  config.insecure_skip_tls_verify = cluster["insecure-skip-tls-verify"].as<bool>(false);
  if (config.insecure_skip_tls_verify && !config.ca_pem.empty()) {
    return error(cluster_field + ".insecure-skip-tls-verify",
                 "cannot be combined with a certificate-authority; remove one of them");
  }

  if (context["user"]) {
    const std::string user_name = context["user"].as<std::string>("");
    const auto user_entry = FindNamed(root["users"], user_name);
    if (!user_entry) {
      return error(context_field + ".user",
                   "names user '" + user_name +
                       "', which is not in users (have: " + Names(root["users"]) + ")");
    }
    const YAML::Node user = (*user_entry)["user"];
    const std::string user_field = "users[" + user_name + "].user";
    if (user) {
      for (const char* unsupported : {"exec", "auth-provider", "username", "as"}) {
        if (user[unsupported]) {
          return error(user_field + "." + unsupported,
                       "is not supported by Fulcrum; use a token, tokenFile or client certificate");
        }
      }
      config.bearer_token = user["token"].as<std::string>("");
      if (user["tokenFile"]) {
        fs::path token_file = user["tokenFile"].as<std::string>("");
        if (token_file.is_relative()) token_file = base / token_file;
        auto token = ReadWholeFile(token_file, user_field + ".tokenFile");
        if (!token) return error(token.error().field, token.error().message);
        config.bearer_token_file = token_file;
        config.bearer_token = *token;
        config.bearer_token = TrimTrailingWhitespace(std::move(config.bearer_token));
      }
      auto cert = DataOrFile(user, "client-certificate", base, user_field);
      if (!cert) return error(cert.error().field, cert.error().message);
      auto key = DataOrFile(user, "client-key", base, user_field);
      if (!key) return error(key.error().field, key.error().message);
      if (cert->empty() != key->empty()) {
        return error(
            user_field + (cert->empty() ? ".client-certificate" : ".client-key"),
            "is missing: a client certificate needs both client-certificate and client-key");
      }
      config.client_certificate_pem = *cert;
      config.client_key_pem = *key;
    }
  }
  if (context["namespace"])
    config.default_namespace = context["namespace"].as<std::string>("default");
  return config;
}

}  // namespace

Result<ClusterConfig> LoadKubeconfig(const fs::path& file, std::string_view context) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return MakeError(ErrorCode::kNotFound,
                     "kubeconfig " + file.string() +
                         ": cannot read the file; check --kubeconfig or $KUBECONFIG");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParseKubeconfigText(text.str(), file, context);
}

Result<ClusterConfig> ParseKubeconfigText(std::string_view yaml, const fs::path& file,
                                          std::string_view context) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidArgument("(file)",
                           "kubeconfig " + file.string() + ": not valid YAML: " + e.what());
  }
  try {
    return ParseKubeconfig(root, file, context);
  } catch (const YAML::Exception& e) {
    // A field of the wrong type (e.g. a list where a string belongs).
    return InvalidArgument("(file)", "kubeconfig " + file.string() + ": malformed: " + e.what());
  }
}

EnvLookup ProcessEnvironment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

Result<ClusterConfig> LoadInClusterConfig(const EnvLookup& env, const InClusterPaths& paths) {
  const auto host = env("KUBERNETES_SERVICE_HOST");
  const auto port = env("KUBERNETES_SERVICE_PORT");
  if (!host || host->empty() || !port || port->empty()) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "not running in a cluster: KUBERNETES_SERVICE_HOST and "
                     "KUBERNETES_SERVICE_PORT must be set");
  }
  ClusterConfig config;
  config.source = "in-cluster service account";
  const bool ipv6 = host->find(':') != std::string::npos;
  config.server = "https://" + (ipv6 ? "[" + *host + "]" : *host) + ":" + *port;
  auto token = ReadWholeFile(paths.token, "serviceaccount token");
  if (!token) return token.error();
  config.bearer_token = *token;
  config.bearer_token = TrimTrailingWhitespace(std::move(config.bearer_token));
  config.bearer_token_file = paths.token;
  auto ca = ReadWholeFile(paths.ca, "serviceaccount ca.crt");
  if (!ca) return ca.error();
  config.ca_pem = *ca;
  if (auto ns = ReadWholeFile(paths.ns, "serviceaccount namespace"); ns && !ns->empty()) {
    config.default_namespace = *ns;
  }
  return config;
}

Result<ClusterConfig> LoadDefaultConfig(const fs::path& explicit_file, std::string_view context,
                                        const EnvLookup& env) {
  if (!explicit_file.empty()) return LoadKubeconfig(explicit_file, context);
  if (auto from_env = env("KUBECONFIG"); from_env && !from_env->empty()) {
    // Like kubectl, the first file of a colon-separated list; merging is not supported.
    return LoadKubeconfig(from_env->substr(0, from_env->find(':')), context);
  }
  if (env("KUBERNETES_SERVICE_HOST")) return LoadInClusterConfig(env);
  if (auto home = env("HOME")) return LoadKubeconfig(fs::path(*home) / ".kube" / "config", context);
  return MakeError(ErrorCode::kNotFound,
                   "no kubeconfig: pass --kubeconfig, set $KUBECONFIG, or run in a cluster");
}

}  // namespace fulcrum::kube
