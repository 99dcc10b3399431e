#!/usr/bin/env python3
"""Writes the protobuf seeds of list_decoder_fuzz and transcoder_fuzz: real-shaped Kubernetes
objects (a Pod as the operator creates it, a GPU Node, the coordinator's Lease, an Event), in
the wire format the API server sends, encoded by protoc from the API's own .proto files.

  tests/fuzz/make_protobuf_seeds.py [K8S_PROTO_ROOT]   (default ~/.cache/fulcrum/k8s-protos)
"""
import os
import subprocess
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/fulcrum/k8s-protos")
HERE = os.path.dirname(os.path.abspath(__file__))

POD = r'''
metadata {
  name: "mixed-gpus-worker-0" namespace: "default" uid: "6f1c2a4e-0d3b-4b8e-9d51-2f7f4e0c9a11"
  resourceVersion: "4181" generation: 1 creationTimestamp { seconds: 1795400000 }
  labels { key: "fulcrum.dev/job" value: "mixed-gpus" }
  labels { key: "fulcrum.dev/role" value: "worker" }
  annotations { key: "fulcrum.dev/gpu-product" value: "NVIDIA-A100-SXM4-40GB" }
  ownerReferences { apiVersion: "fulcrum.dev/v1alpha1" kind: "HeteroTrainingJob" name: "mixed-gpus"
                    uid: "0b9d7e3c-5a61-4f7a-8e2d-c3b1a9f0e2d4" controller: true blockOwnerDeletion: true }
  managedFields { manager: "fulcrum-operator" operation: "Apply" apiVersion: "v1"
                  time { seconds: 1795400000 } fieldsType: "FieldsV1"
                  fieldsV1 { Raw: "{\"f:metadata\":{\"f:labels\":{\"f:fulcrum.dev/job\":{}}},\"f:spec\":{\"f:containers\":{\"k:{\\\"name\\\":\\\"trainer\\\"}\":{\".\":{},\"f:image\":{}}}}}" } }
}
spec {
  containers {
    name: "trainer" image: "fulcrum-trainer:0.1.0" command: "fulcrum-trainer"
    args: "--coordinator" args: "fulcrum-coordinator.fulcrum-system:7070" args: "--job" args: "mixed-gpus"
    ports { name: "metrics" containerPort: 9400 protocol: "TCP" }
    env { name: "FULCRUM_POD" valueFrom { fieldRef { apiVersion: "v1" fieldPath: "metadata.name" } } }
    resources { limits { key: "nvidia.com/gpu" value { string: "1" } }
                requests { key: "memory" value { string: "2Gi" } } }
  }
  restartPolicy: "Never" nodeName: "a100-0" terminationGracePeriodSeconds: 30
  nodeSelector { key: "nvidia.com/gpu.product" value: "NVIDIA-A100-SXM4-40GB" }
  tolerations { key: "nvidia.com/gpu" operator: "Exists" effect: "NoSchedule" }
}
status {
  phase: "Running" podIP: "10.244.1.7" hostIP: "172.18.0.3" startTime { seconds: 1795400003 }
  conditions { type: "Ready" status: "True" lastTransitionTime { seconds: 1795400009 } }
  containerStatuses { name: "trainer" ready: true restartCount: 0 image: "fulcrum-trainer:0.1.0"
                      state { running { startedAt { seconds: 1795400008 } } } }
}
'''

NODE = r'''
metadata {
  name: "a100-0" uid: "c2f1d3a5-7b9e-4c1d-8f2a-6e5b4d3c2b1a" resourceVersion: "3990"
  labels { key: "nvidia.com/gpu.product" value: "NVIDIA-A100-SXM4-40GB" }
  labels { key: "nvidia.com/gpu.memory" value: "40960" }
  labels { key: "fulcrum.dev/fake-node" value: "kwok" }
}
spec { taints { key: "nvidia.com/gpu" value: "present" effect: "NoSchedule" } }
status {
  capacity { key: "nvidia.com/gpu" value { string: "8" } }
  capacity { key: "cpu" value { string: "96" } }
  allocatable { key: "memory" value { string: "1056561104Ki" } }
  conditions { type: "Ready" status: "True" reason: "KubeletReady" lastHeartbeatTime { seconds: 1795400100 } }
  addresses { type: "InternalIP" address: "172.18.0.3" }
  nodeInfo { kubeletVersion: "v1.34.4" architecture: "amd64" operatingSystem: "linux" }
}
'''

LEASE = r'''
metadata { name: "fulcrum-operator" namespace: "fulcrum-system" resourceVersion: "4200" uid: "9a8b7c6d" }
spec { holderIdentity: "fulcrum-operator-7d9f8-abcde" leaseDurationSeconds: 15
       acquireTime { seconds: 1795400000 nanos: 123456000 } renewTime { seconds: 1795400120 nanos: 654321000 }
       leaseTransitions: 2 }
'''

EVENT = r'''
metadata { name: "mixed-gpus.1879f3c2a1b0" namespace: "default" resourceVersion: "4300" }
involvedObject { kind: "HeteroTrainingJob" namespace: "default" name: "mixed-gpus"
                 apiVersion: "fulcrum.dev/v1alpha1" uid: "0b9d7e3c-5a61-4f7a-8e2d-c3b1a9f0e2d4" }
reason: "Rebalanced" message: "batches 64/54/10 -> 48/52/28 at step 81 (speed, gain 12%)"
source { component: "fulcrum-operator" } firstTimestamp { seconds: 1795400200 }
lastTimestamp { seconds: 1795400200 } count: 1 type: "Normal"
eventTime { seconds: 1795400200 nanos: 5000 } reportingComponent: "fulcrum.dev/operator"
'''


def encode(message, proto, text):
    return subprocess.run(["protoc", f"--encode={message}", "-I", ROOT, proto], input=text.encode(),
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout


def field(number, payload):
    size, varint = len(payload), b""
    while True:
        varint += bytes([(size & 0x7F) | (0x80 if size > 0x7F else 0)])
        size >>= 7
        if not size:
            return bytes([number << 3 | 2]) + varint + payload


def envelope(api_version, kind, raw):
    """ "k8s\\0" + runtime.Unknown{typeMeta, raw, contentType}, as the API server frames it."""
    type_meta = field(1, api_version.encode()) + field(2, kind.encode())
    return (b"k8s\0" + field(1, type_meta) + field(2, raw) +
            field(4, b"application/vnd.kubernetes.protobuf"))


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as out:
        out.write(data)


core = "k8s.io/api/core/v1/generated.proto"
lease = "k8s.io/api/coordination/v1/generated.proto"
pods = encode("k8s.io.api.core.v1.PodList", core,
              'metadata { resourceVersion: "4181" continue: "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ" } items {'
              + POD + '} items {' + POD.replace("worker-0", "worker-1").replace("a100-0", "t4-0") + '}')
nodes = encode("k8s.io.api.core.v1.NodeList", core, 'metadata { resourceVersion: "3990" } items {' + NODE + '}')
leases = encode("k8s.io.api.coordination.v1.LeaseList", lease,
                'metadata { resourceVersion: "4200" } items {' + LEASE + '}')
# The first byte is the fuzz targets' own: the piece size (list_decoder), the type index in
# transcoder_fuzz.cc's kTypes (transcoder).
write("list_decoder_fuzz", "pod_list", b"\x07" + envelope("v1", "PodList", pods))
write("list_decoder_fuzz", "node_list", b"\x3f" + envelope("v1", "NodeList", nodes))
write("list_decoder_fuzz", "lease_list", b"\x00" + envelope("coordination.k8s.io/v1", "LeaseList", leases))
write("list_decoder_fuzz", "empty_pod_list", b"\x01" + envelope("v1", "PodList", encode(
    "k8s.io.api.core.v1.PodList", core, 'metadata { resourceVersion: "12" }')))
write("transcoder_fuzz", "pod", b"\x00" + encode("k8s.io.api.core.v1.Pod", core, POD))
write("transcoder_fuzz", "node", b"\x01" + encode("k8s.io.api.core.v1.Node", core, NODE))
write("transcoder_fuzz", "event", b"\x03" + encode("k8s.io.api.core.v1.Event", core, EVENT))
write("transcoder_fuzz", "lease", b"\x07" + encode("k8s.io.api.coordination.v1.Lease", lease, LEASE))
