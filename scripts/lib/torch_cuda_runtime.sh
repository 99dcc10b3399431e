#!/usr/bin/env bash
# The CUDA trainer image's runtime libraries: downloads the wheels TORCH_CUDA_RUNTIME_WHEELS
# (scripts/lib/common.sh: torch and the nvidia-* wheels it requires, at their pins) from PyPI
# and keeps only their shared libraries, in the wheels' own layout, so that libtorch_cuda.so's
# RPATH ($ORIGIN/../../nvidia/{cu13,cudnn,nccl,cusparselt,nvshmem}/lib) finds them:
#
#   DIR/out/torch/lib/*.so*        libtorch, libc10, libtorch_cuda, ... (not libtorch_python.so)
#   DIR/out/nvidia/*/lib/*.so*     cuBLAS, cuDNN, NCCL, cuFFT, ... (no headers, no Python code)
#   DIR/wheels.txt                 file name, size in bytes and sha256 of every wheel fetched
#   DIR/.complete                  written last; a DIR with it is never fetched again
#
#   torch_cuda_runtime.sh DIR
#
# Run by scripts/build-cuda-image (DIR = $(torch_cuda_runtime_dir), a cache named by the pins)
# and by trainer_image/Dockerfile.cuda's stage cuda-runtime. Needs python3 with pip, and unzip.
set -euo pipefail
source "$(dirname "$0")/common.sh"

dir=${1:?usage: torch_cuda_runtime.sh DIR}
if [[ -f $dir/.complete ]]; then log "torch-cuda-runtime: cached in $dir"; exit 0; fi
command -v unzip >/dev/null || die "unzip is not installed"
rm -rf "$dir.tmp"; mkdir -p "$dir.tmp/wheels" "$dir.tmp/out"
start=$SECONDS
platforms=()
for platform in "${TORCH_CUDA_RUNTIME_PLATFORMS[@]}"; do platforms+=(--platform "$platform"); done
log "torch-cuda-runtime: pip download ${TORCH_CUDA_RUNTIME_WHEELS[*]}"
# --no-deps: the list is complete (torch's own pins); Python-only requirements stay out.
PIP_ROOT_USER_ACTION=ignore python3 -m pip download --quiet --disable-pip-version-check --no-cache-dir \
  --no-deps --only-binary=:all: "${platforms[@]}" --python-version "$TORCH_CUDA_RUNTIME_PYTHON" \
  -d "$dir.tmp/wheels" "${TORCH_CUDA_RUNTIME_WHEELS[@]}"
downloaded=$(du -sb "$dir.tmp/wheels" | cut -f1)
log "torch-cuda-runtime: downloaded $(ls "$dir.tmp/wheels" | wc -l) wheels, $((downloaded / 1000000)) MB, in $((SECONDS - start))s"
(cd "$dir.tmp/wheels" && for wheel in *.whl; do
  printf '%s %s %s\n' "$wheel" "$(stat -c %s "$wheel")" "$(sha256sum "$wheel" | cut -d' ' -f1)"
done) >"$dir.tmp/wheels.txt"
for wheel in "$dir.tmp"/wheels/*.whl; do
  case $(basename "$wheel") in
    torch-*) members=('torch/lib/*.so*' -x 'torch/lib/libtorch_python.so') ;;
    *) members=('nvidia/*/lib/*.so*') ;;
  esac
  # unzip exits 11 when no member matches: a wheel without shared libraries (none expected).
  status=0
  unzip -q -o "$wheel" "${members[@]}" -d "$dir.tmp/out" || status=$?
  case $status in
    0) ;;
    11) log "torch-cuda-runtime: no shared library in $(basename "$wheel")" ;;
    *) die "unzip $(basename "$wheel") failed (exit $status)" ;;
  esac
done
rm -rf "$dir.tmp/wheels"
unpacked=$(du -sb "$dir.tmp/out" | cut -f1)
rm -rf "$dir"; mv "$dir.tmp" "$dir"; touch "$dir/.complete"
log "torch-cuda-runtime: $(find "$dir/out" -name '*.so*' | wc -l) libraries, $((unpacked / 1000000)) MB, in $dir ($((SECONDS - start))s; wheels $((downloaded / 1000000)) MB)"
