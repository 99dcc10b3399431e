// The FileDescriptorSet of the Kubernetes API types and the list of fields whose JSON form
// differs ("inline <message> <field>", "rename <message> <field> <json name>" lines, from
// scripts/lib/k8s_json_fields.py), embedded at build time (k8s_descriptor_set.cc and
// k8s_json_fields.cc in the build tree; see operator/kube/CMakeLists.txt).
#pragma once

#include <cstddef>

namespace fulcrum::kube::protobuf {
extern const unsigned char kK8sDescriptorSet[];
extern const std::size_t kK8sDescriptorSetSize;
extern const unsigned char kK8sJsonFields[];
extern const std::size_t kK8sJsonFieldsSize;
}  // namespace fulcrum::kube::protobuf
