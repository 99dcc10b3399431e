# Shared by scripts/*: where cached tools live and how to find them.
# Sourced, not run. Keep in sync with nothing else: this is the one place.

FULCRUM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FULCRUM_CACHE="${FULCRUM_CACHE:-$HOME/.cache/fulcrum}"
FULCRUM_TOOLS_DIR="${FULCRUM_TOOLS_DIR:-$FULCRUM_ROOT/tests/cluster/tools}"  # overridable for tests

# Versions we build. Changing one here (and regenerating its go.mod) changes the
# cache key, so a new version is built next to the old one, never over it.
KUBERNETES_VERSION=v1.34.4
# The CUDA build links the C++ libtorch inside PyPI's torch wheel; CUDA and NCCL are pinned to
# the versions that wheel requires (its Requires-Dist: cuda-toolkit 13.0.2, nvidia-nccl-cu13),
# so our code and libtorch load one libcudart and one libnccl.
TORCH_CUDA_WHEEL=torch==2.11.0                # 2.11.0+cu130: CUDA 13.0
CUDA_RUNTIME_WHEEL=nvidia-cuda-runtime==13.0.96
CUDA_CRT_WHEEL=nvidia-cuda-crt==13.0.88      # crt/ headers that cuda_runtime_api.h includes
CUDA_CCCL_WHEEL=nvidia-cuda-cccl==13.0.85     # nv/target, included by cuda_fp16.h (via nccl.h)
NCCL_WHEEL=nvidia-nccl-cu13==2.28.9
# The CUDA trainer image's runtime libraries (scripts/build-cuda-image, trainer_image/Dockerfile.cuda
# stage cuda-runtime): the torch wheel and every nvidia-* wheel it requires, at the versions its
# Requires-Dist pins (cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,
# nvjitlink,nvrtc,nvtx]==13.0.2, nvidia-cudnn-cu13, -cusparselt-cu13, -nccl-cu13, -nvshmem-cu13).
# Fetched with --no-deps, so this list is exactly what the image holds; change it with the torch pin.
TORCH_CUDA_RUNTIME_WHEELS=(
  "$TORCH_CUDA_WHEEL" "$CUDA_RUNTIME_WHEEL" "$NCCL_WHEEL"
  nvidia-cublas==13.1.0.3 nvidia-cuda-cupti==13.0.85 nvidia-cuda-nvrtc==13.0.88
  nvidia-cufft==12.0.0.61 nvidia-cufile==1.15.1.6 nvidia-curand==10.4.0.35
  nvidia-cusolver==12.0.4.66 nvidia-cusparse==12.6.3.3 nvidia-nvjitlink==13.0.88
  nvidia-nvtx==13.0.85 nvidia-cudnn-cu13==9.19.0.56 nvidia-cusparselt-cu13==0.8.0
  nvidia-nvshmem-cu13==3.4.5
)
# The wheels' platform: torch's is manylinux_2_28 (glibc 2.28; bookworm has 2.36), the nvidia
# ones are tagged as low as manylinux_2_5, and pip (23.x) does not take a manylinux_2_28 target
# to accept older tags, so every one up to 2_28 is named.
TORCH_CUDA_RUNTIME_PYTHON=3.12
TORCH_CUDA_RUNTIME_PLATFORMS=(manylinux2014_x86_64 manylinux2010_x86_64 manylinux1_x86_64)
for _glibc in $(seq 5 28); do TORCH_CUDA_RUNTIME_PLATFORMS+=("manylinux_2_${_glibc}_x86_64"); done
unset _glibc

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The cache folder of one Go tool: named by its module version and a hash of its
# go.mod and go.sum, so any change to what we build gives a new folder.
go_tool_dir() {
  local tool=$1 module_dir="$FULCRUM_TOOLS_DIR/$1" version hash
  version=$(sed -n 's/^require \([^ ]*\) \(v[^ ]*\)$/\2/p' "$module_dir/go.mod" | head -1)
  [[ -n $version ]] || die "cannot read the pinned version from $module_dir/go.mod"
  hash=$(cat "$module_dir/go.mod" "$module_dir/go.sum" | sha256sum | cut -c1-12)
  printf '%s/%s-%s-%s' "$FULCRUM_CACHE" "$tool" "$version" "$hash"
}

# Directory of the built binaries of a tool, or fail with the fix.
go_tool_bin() {
  local dir
  dir="$(go_tool_dir "$1")"
  [[ -f $dir/.complete ]] || die "$1 binaries are not built ($dir missing); run scripts/setup"
  printf '%s/bin' "$dir"
}

# The .proto files of the built-in API types (k8s.io/api, k8s.io/apimachinery at the
# version matching KUBERNETES_VERSION), which the C++ client compiles into a descriptor set.
K8S_API_MODULE_VERSION="v0.${KUBERNETES_VERSION#v1.}"
# The -2 suffix: bump it when what stage k8s-protos writes changes.
k8s_protos_dir() { printf '%s/k8s-protos-%s-3' "$FULCRUM_CACHE" "$K8S_API_MODULE_VERSION"; }

torch_cuda_dir() { printf '%s/libtorch-cuda-%s' "$FULCRUM_CACHE" "$(printf '%s' "$TORCH_CUDA_WHEEL" | sha256sum | cut -c1-12)"; }
cuda_dir() { printf '%s/cuda-%s' "$FULCRUM_CACHE" "$(printf '%s ' "$CUDA_RUNTIME_WHEEL" "$CUDA_CRT_WHEEL" "$CUDA_CCCL_WHEEL" "$NCCL_WHEEL" | sha256sum | cut -c1-12)"; }
# The shared libraries of TORCH_CUDA_RUNTIME_WHEELS, unpacked in the wheels' layout under out/
# (scripts/lib/torch_cuda_runtime.sh), named by a hash of the pins, the platform and the layout.
torch_cuda_runtime_dir() {
  printf '%s/torch-cuda-runtime-%s' "$FULCRUM_CACHE" "$(printf '%s ' "${TORCH_CUDA_RUNTIME_WHEELS[@]}" \
    "$TORCH_CUDA_RUNTIME_PYTHON" "${TORCH_CUDA_RUNTIME_PLATFORMS[@]}" out-1 | sha256sum | cut -c1-12)"
}

# Container images (scripts/setup stage images, tests/images). No registry is reachable, so the
# base is Debian bookworm made by mmdebstrap from Debian's packages, slimmed like debian:*-slim
# (no manuals, docs or locales; the dpkg and apt settings stay in the image, so packages installed
# on it later are slim too). Its tarball is cached under a name hashed from these settings, and
# `podman import` tags it $(images_base_ref), also a name with that hash, so changing the
# package list or the options makes a new base beside the old one.
IMAGES_SUITE=bookworm
IMAGES_BASE_OPTIONS=(
  --variant=minbase
  --aptopt='APT::Install-Recommends "false"'
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/locale/*'
)
images_base_key() { printf '%s\n' "$IMAGES_SUITE" "${IMAGES_BASE_OPTIONS[@]}" | sha256sum | cut -c1-12; }
images_base_dir() { printf '%s/debian-%s-rootfs-%s' "$FULCRUM_CACHE" "$IMAGES_SUITE" "$(images_base_key)"; }
images_base_ref() { printf 'localhost/fulcrum-base:%s-%s' "$IMAGES_SUITE" "$(images_base_key)"; }
# podman's settings for this project, kept apart from a user's own (CONTAINERS_CONF names it):
# runc, since crun fails on this machine's hybrid cgroup layout, and bounded rlimits, since
# containers with unbounded ones are refused here.
images_containers_conf() { printf '%s/containers.conf' "$FULCRUM_CACHE"; }
