// The process between the agent and one start of one container, as
// containerd-shim or conmon are for a real kubelet. It exists so that containers
// outlive the agent: a restarted agent finds them running and adopts them
// (ContainerProcess::Adopt), and learns how they ended from the shim's exit.json.
//
// It enters its own mount namespace and bind-mounts the pod's volumes at their
// mountPaths, so that only this container sees them; starts the container in a
// process group of its own with stdout and stderr appended to the log file;
// forwards SIGTERM/SIGINT/SIGHUP to that group; and when the container's main
// process ends, kills whatever the container left behind (its group, and any
// descendant re-parented to the shim, which is a child subreaper) before it
// writes exit.json and exits. If the shim itself is killed, the kernel kills the
// container's main process (PR_SET_PDEATHSIG).
#pragma once

#include <filesystem>

namespace fulcrum::local_node {

// Runs the container described by `state_dir`/spec.json to its end; returns the
// shim's exit status (0 when it recorded an outcome in exit.json, even a failed start).
int RunShim(const std::filesystem::path& state_dir);

}  // namespace fulcrum::local_node
