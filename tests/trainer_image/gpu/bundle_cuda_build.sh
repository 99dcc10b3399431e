#!/usr/bin/env bash
# Bundles the CUDA build's GPU-check binaries (stripped) and the shared libraries they need
# beyond libtorch, CUDA and the C library (gRPC, protobuf, abseil, prometheus-cpp, ...) into one
# folder, for a GPU machine that has a CUDA torch 2.11 but none of Debian's packages. Then, on
# that machine: run_gpu_checks.sh DIR/bin DIR/lib OUT.
#
#   bundle_cuda_build.sh CUDA_BUILD_DIR DIR
set -euo pipefail
build=${1:?CUDA_BUILD_DIR}; dir=${2:?DIR}
rm -rf "$dir"; mkdir -p "$dir/bin" "$dir/lib"
binaries=(
  trainer_image/trainer/fulcrum-trainer
  trainer_image/trainer/fulcrum-nccl-collective-check
  trainer_image/gpu/fulcrum-gpu-probe
  bench/trainer/fulcrum-step-curve
  tests/trainer_image/trainer_core_test
  operator/cmd/fulcrum_coordinator/fulcrum-coordinator
)
for binary in "${binaries[@]}"; do
  if [[ -x $build/$binary ]]; then
    strip -o "$dir/bin/$(basename "$binary")" "$build/$binary"
  else
    echo "not built, left out: $binary" >&2
  fi
done
# Every library the binaries load that is neither libtorch's, CUDA's, nor the C/C++ runtime
# (which the GPU machine has, newer).
ldd "$dir"/bin/* 2>/dev/null | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
  case $(basename "$lib") in
    libtorch*|libc10*|libcudart*|libnccl*|libgomp*|libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*|libpthread*|libdl.so*|librt.so*) continue ;;
  esac
  strip -o "$dir/lib/$(basename "$lib")" "$lib" 2>/dev/null || cp "$lib" "$dir/lib/"
done
# The fulcrum Python package (its protocol messages generated here) and its GPU check, with the
# wheels it imports besides torch for the Python versions a GPU machine may have (PyPI).
source_root=$(cd "$(dirname "$0")/../../.." && pwd)
(cd "$source_root/python" && python3 -m fulcrum.stubs)
mkdir -p "$dir/python/wheels"
cp -r "$source_root/python/fulcrum" "$dir/python/"
find "$dir/python" -name __pycache__ -prune -exec rm -rf {} +
cp "$source_root/tests/python/runtime_worker.py" "$source_root/tests/python/gpu_runtime_check.py" \
  "$dir/python/"
for version in 3.11 3.12 3.13; do
  python3 -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --python-version "$version" \
    --no-deps -d "$dir/python/wheels" grpcio protobuf prometheus-client
done
du -sh "$dir/bin" "$dir/lib" "$dir/python"
