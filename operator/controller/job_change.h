// Which changes to a HeteroTrainingJob need a reconcile. The operator writes every running
// job's status every status.minInterval; each write comes back through the watch as an update,
// and reconciling for it doubled the controller's work (docs/benchmarks.md, "Operator at
// scale") to learn nothing: the status is the reconciler's own output. Like
// controller-runtime's GenerationChangedPredicate, but it also counts what changes without a
// new metadata.generation and that the reconciler reads: labels, annotations, finalizers,
// deletion.
#pragma once

#include <nlohmann/json.hpp>

namespace fulcrum::controller {

// True unless the two versions of a job differ only in status and in the bookkeeping every
// write changes (resourceVersion, managedFields).
bool ChangedBeyondStatus(const nlohmann::json& before, const nlohmann::json& after);

}  // namespace fulcrum::controller
