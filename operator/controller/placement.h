// Where a job's new workers may go, from what the reconciler observed of the cluster: the spec
// new pods are placed by (gpuSelector narrowed by maxWorkersPerProduct), how many more workers
// fit now, and the product speeds a pod prefers. Pure: the node inventory and the GPUs every
// trainer pod holds are read by the caller and passed in.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "operator/controller/gpu_node.h"
#include "operator/controller/job_spec.h"
#include "operator/controller/worker_plan.h"

namespace fulcrum::controller {

// Holds or will hold its node's GPUs: not being deleted, not ended.
bool Active(const WorkerPod& pod);

// gpuSelector plus the products whose maxWorkersPerProduct the job's placed workers already
// reach. `product_of`: the GPU product of each node the job's pods are on.
JobSpec PlacementSpec(const JobSpec& spec, const std::vector<WorkerPod>& own_pods,
                      const std::map<std::string, std::string>& product_of);

// Worker slots for the job on `candidates` (the nodes `placement` admits, not `excluded`), left
// by every trainer pod (`used_gpus` by node) and by the job's own pods that wait for the
// scheduler. CPU workers (gpusPerWorker 0) take one slot per node, so a CPU job spreads out.
int FreeSlots(const JobSpec& placement, const std::vector<WorkerPod>& own_pods,
              const std::set<std::string>& excluded, const std::vector<GpuNode>& candidates,
              const std::map<std::string, int>& used_gpus,
              const std::map<std::string, std::string>& product_of);

// The GPU products among `nodes` whose compute capability is below `minimum` (the CUDA
// trainer image has no kernels for them: torch cu130 starts at 7.5, so a V100's 7.0 cannot run
// it), with their capability. Nodes whose capability is unknown are left to try.
std::map<std::string, int> UnsupportedProducts(const std::vector<GpuNode>& nodes, int minimum);

// `spec` with `unsupported` products denied, so no worker is placed where it could only fail.
JobSpec WithoutUnsupported(JobSpec spec, const std::map<std::string, int>& unsupported);

// Each product among `candidates` with a prior speed, once, in the candidates' order (fastest
// first): a new pod prefers them in that order (preferred node affinity, weight by speed).
std::vector<std::pair<std::string, double>> ProductSpeeds(const std::vector<GpuNode>& candidates);

}  // namespace fulcrum::controller
