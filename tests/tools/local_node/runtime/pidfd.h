// Process file descriptors (pidfd_open, pidfd_send_signal) by system call:
// bookworm's glibc 2.36 declares them in <sys/pidfd.h> without extern "C", so
// C++ cannot link against its wrappers (fixed in glibc 2.37).
#pragma once

#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

namespace fulcrum::local_node {

// A descriptor that polls readable once `pid` has ended; -1 with errno if there is no such process.
inline int PidfdOpen(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

inline int PidfdSendSignal(int pidfd, int signal) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, 0));
}

}  // namespace fulcrum::local_node
