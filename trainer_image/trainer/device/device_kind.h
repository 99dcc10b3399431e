// Which device a trainer computes on. Torch-free (the command line picks it).
#pragma once

namespace fulcrum::trainer {

enum class DeviceKind { kAuto, kCpu, kCuda };  // auto: cuda when a GPU is visible

}  // namespace fulcrum::trainer
