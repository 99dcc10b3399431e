// spec.template: the user's part of a trainer pod (volumes and mounts, env from Secrets,
// resources, service account, pull secrets, tolerations, affinity, security contexts), shaped
// like a Kubernetes PodTemplateSpec with exactly one container, `trainer`. Parsed and checked
// here (the CRD's CEL rules refuse the same at admission; an object can still reach the
// controller from an older CRD or a hand-made test), then merged into the pod the operator
// builds, whose own parts win: its labels, env, token volume, GPU resource, GPU placement and
// restart policy (docs/operator.md, "Pod template").
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "common/result.h"
#include "operator/controller/gpu_node.h"

namespace fulcrum::controller {

// The operator's token volume and where the trainer container mounts it. Volume names with
// the prefix, and mount paths under the directory, are the operator's.
inline constexpr const char* kTokenVolumeName = "fulcrum-token";
inline constexpr const char* kReservedVolumePrefix = "fulcrum-";
inline constexpr const char* kTokenMountPath = "/var/run/fulcrum/token";

// Requests a trainer container gets for a resource the template sets neither a request nor a
// limit for, so trainer pods are Burstable rather than BestEffort (the first evicted under
// node pressure): one core for the training loop and its loader threads, and the host memory
// a libtorch process with a CUDA context and a prefetching loader needs. A limit without a
// request is left alone: Kubernetes then requests the limit.
inline constexpr const char* kDefaultCpuRequest = "1";
inline constexpr const char* kDefaultMemoryRequest = "2Gi";

// Kubernetes types are kept as the user wrote them (the API server checks them when the pod is
// created); what the merge or the checks need is read into named members.
struct PodTemplate {
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  nlohmann::json volumes = nlohmann::json::array();
  std::string service_account_name;
  nlohmann::json image_pull_secrets = nlohmann::json::array();
  nlohmann::json tolerations = nlohmann::json::array();
  std::map<std::string, std::string> node_selector;
  nlohmann::json affinity = nlohmann::json::object();  // nodeAffinity, podAffinity, podAntiAffinity
  std::string priority_class_name;
  nlohmann::json security_context = nlohmann::json::object();  // the pod's
  // The trainer container's part.
  nlohmann::json volume_mounts = nlohmann::json::array();
  nlohmann::json env = nlohmann::json::array();  // {name, value} or {name, valueFrom}
  nlohmann::json env_from = nlohmann::json::array();
  nlohmann::json requests = nlohmann::json::object();
  nlohmann::json limits = nlohmann::json::object();
  nlohmann::json container_security_context = nlohmann::json::object();
};

// True for the env names the operator sets on every trainer (FULCRUM_*, and the downward-API
// POD_NAME, POD_IP and NODE_NAME its flags refer to).
bool IsOperatorEnvName(const std::string& name);
// True for the pod label keys the operator sets or selects by (fulcrum.dev/*,
// app.kubernetes.io/name and app.kubernetes.io/managed-by).
bool IsOperatorLabelKey(const std::string& key);

// `spec.template` of a stored job (null: none). Errors name the field under spec.template and
// say what to do instead.
Result<PodTemplate> ParsePodTemplate(const nlohmann::json& spec_template);

// Adds the template to `pod`, a trainer pod the operator built (its one container the
// trainer): labels and annotations (the operator's labels win), volumes and mounts after the
// token's, env after the operator's (which win over envFrom too, as Kubernetes orders them),
// resources with the operator's GPU resource (`keys.resource`) set to `gpus` or removed when
// 0, default CPU and memory requests, tolerations after the operator's, the user's required
// node affinity ANDed with the operator's GPU placement and preferred terms appended, pod
// (anti-)affinity, node selector, service account, pull secrets, priority class and security
// contexts as given. Pure.
void MergePodTemplate(const PodTemplate& user, const GpuLabelKeys& keys, int gpus,
                      nlohmann::json& pod);

// Both node affinities must hold: Kubernetes ORs nodeSelectorTerms and ANDs the requirements
// inside one term, so the result has a term for every pair of terms, with the pair's
// matchExpressions and matchFields joined. Preferred terms are concatenated. Either side may
// be empty.
nlohmann::json AndNodeAffinity(const nlohmann::json& operator_affinity,
                               const nlohmann::json& user_affinity);

}  // namespace fulcrum::controller
