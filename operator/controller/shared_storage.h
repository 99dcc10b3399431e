// Whether the paths every worker must share lie on storage every worker shares. checkpoint.path
// and output.path are written by the trainers and read back after a suspend, a restart or the
// job's end; on the container's own filesystem (no volume), an emptyDir or a hostPath (one per
// node) they are lost with the pod or split across nodes, and a suspended job resumes from step
// 0 without a word. Pure: the spec's template in, the problems out; the reconciler puts them in
// a condition and an Event before the first suspend can lose work.
#pragma once

#include <string>
#include <vector>

#include "operator/controller/job_spec.h"

namespace fulcrum::controller {

struct StorageProblem {
  std::string field;    // spec.checkpoint.path, spec.output.path
  std::string message;  // what is wrong and the fix
};

// The volume types whose files every worker's pod sees alike: a PersistentVolumeClaim (its
// access modes are the claim's business), or a network file system mounted directly.
bool SharedVolumeSource(const nlohmann::json& volume);

// checkpoint.path and output.path (where set) against the template's volumes and the trainer
// container's volumeMounts: each must lie under a writable mount of a shared volume.
std::vector<StorageProblem> UnsharedPaths(const JobSpec& spec);

}  // namespace fulcrum::controller
