#!/usr/bin/env bash
# The GPU checks of the CUDA build (docs/trainer.md, "On a GPU"), run on a machine with one
# NVIDIA GPU and a CUDA torch 2.11 installed for Python (its libtorch and CUDA libraries are the
# ones the CUDA build links against). Everything it measures is a GPU figure; nothing here is
# emulated. Writes logs and JSON into OUT_DIR and prints a summary.
#
#   run_gpu_checks.sh BIN_DIR LIB_DIR OUT_DIR
#     BIN_DIR  fulcrum-trainer, fulcrum-step-curve, fulcrum-gpu-probe,
#              fulcrum-nccl-collective-check, trainer_core_test (CUDA build)
#     LIB_DIR  the build machine's shared libraries they need beyond libtorch/CUDA (gRPC, ...)
#   ONLY="name ..." runs only the checks whose names start with one of those words.
# Logs end up in OUT_DIR/logs.tar.gz (written again after every check, so a run cut short still
# brings back what it did), the benchmarks' JSON in OUT_DIR/*.json; OUT_DIR gets nothing else
# (a lent machine brings back few files), the rest is in a scratch folder.
set -uo pipefail
bin=${1:?BIN_DIR}; libs=${2:?LIB_DIR}; out=${3:?OUT_DIR}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

torch_lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
site=$(dirname "$(dirname "$torch_lib")")
cuda_libs=$(find "$site/nvidia" -name 'libcudart.so.13' -o -name 'libnccl.so.2' | xargs -r -n1 dirname | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH="$torch_lib:$cuda_libs$libs"
echo "libtorch from $torch_lib ($(python3 -c 'import torch; print(torch.__version__)'))"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

failures=0
logs="$work/logs"; mkdir -p "$logs"
keep_logs() { tar -C "$work" -czf "$out/logs.tar.gz" logs; }
wanted() {
  [[ -z ${ONLY:-} ]] && return 0
  local word; for word in $ONLY; do [[ $1 == "$word"* ]] && return 0; done; return 1
}
check() {  # check NAME COMMAND...: runs it, logs to OUT/logs/NAME.log, counts failures
  local name=$1; shift
  wanted "$name" || return 0
  local start=$SECONDS
  if "$@" >"$logs/$name.log" 2>&1; then
    echo "PASS $name ($((SECONDS - start)) s)"
  else
    echo "FAIL $name (exit $?, $((SECONDS - start)) s); last lines:"; tail -5 "$logs/$name.log"
    failures=$((failures + 1))
  fi
  keep_logs
}

# Ports below the ephemeral range, as everywhere else (scripts/lib/free_port.py says why).
free_port_script="$(cd "$(dirname "$0")/../../.." && pwd)/scripts/lib/free_port.py"
trainer() {  # one static rank on this GPU; the rendezvous store on a free loopback port
  local port; port=$(python3 "$free_port_script")
  "$bin/fulcrum-trainer" --world-size 1 --rank 0 --rendezvous "127.0.0.1:$port" "$@"
}

check gpu_probe "$bin/fulcrum-gpu-probe"
check nccl_collective_check "$bin/fulcrum-nccl-collective-check"
check trainer_core_test "$bin/trainer_core_test"

# Training the CNN on the GPU through NCCL (a world of one: this machine has one GPU).
wanted train && {
check train_cnn_cuda_nccl trainer --device cuda --collective nccl --model cnn --image-size 32 \
  --hidden 64 --batches 256 --steps 200 --dataset-size 51200 --lr 0.05
grep -q '"device":"cuda:0"' "$logs/train_cnn_cuda_nccl.log" || { echo "FAIL: trainer did not run on cuda:0"; failures=$((failures + 1)); }
grep -q '"collective":"nccl"' "$logs/train_cnn_cuda_nccl.log" || { echo "FAIL: trainer did not use NCCL"; failures=$((failures + 1)); }
grep '"finished"' "$logs/train_cnn_cuda_nccl.log"
}

# Through a coordinator: the trainer's Hello carries the GPU's own name and memory (from
# cudaGetDeviceProperties, not a node label), which the coordinator logs and keeps.
if wanted coordinator_hello; then
  hello="$logs/coordinator"; mkdir -p "$hello"
  echo "local gpu-check-token" >"$hello/tokens"; echo "gpu-check-token" >"$hello/token"
  "$bin/fulcrum-coordinator" --listen 127.0.0.1:0 --job-token-file "$hello/tokens" --global-batch 256 \
    --min-workers 1 --state-file "$hello/state.json" --settle-ms 300 --insecure true \
    >"$logs/coordinator.log" 2>&1 &
  coordinator=$!
  port=""
  for _ in $(seq 100); do
    port=$(grep -o '"port":[0-9]*' "$logs/coordinator.log" | head -1 | cut -d: -f2)
    [[ -n $port ]] && break; sleep 0.1
  done
  check coordinator_hello_trainer "$bin/fulcrum-trainer" --coordinator "127.0.0.1:$port" --coordinator-insecure true \
    --token-file "$hello/token" --job local --pod gpu-trainer --device cuda --model cnn \
    --image-size 32 --hidden 64 --steps 30
  kill "$coordinator" 2>/dev/null; wait "$coordinator" 2>/dev/null
  joined=$(grep '"trainer joined"' "$logs/coordinator.log" | head -1)
  echo "coordinator saw: $joined" | cut -c1-300
  if [[ $joined == *'"gpu_product":"NVIDIA'* && $joined != *'"gpu_memory":0'* ]]; then
    echo "PASS coordinator_hello (the device's product and memory reached the coordinator)"
  else
    echo "FAIL coordinator_hello"; failures=$((failures + 1))
  fi
fi

# A peer that never joins: rank 0 of a world of 2, alone. NCCL's communicator must time out and
# be aborted (not hang) and the trainer fall out of the generation; a static group cannot
# rejoin, so it exits 1. (Two ranks cannot share one GPU in NCCL, so this is the peer-loss check
# one GPU allows.)
if wanted nccl_absent_peer; then
  start=$SECONDS
  timeout 120 bash -c "$(declare -f trainer); bin='$bin'; free_port_script='$free_port_script'; trainer --world-size 2 --device cuda \
    --collective nccl --batches 8,8 --steps 5 --collective-timeout-ms 5000" \
    >"$logs/nccl_absent_peer.log" 2>&1
  rc=$?
  if ((rc == 1)) && grep -q 'not all 2 ranks joined' "$logs/nccl_absent_peer.log"; then
    echo "PASS nccl_absent_peer (timed out, aborted and fell out in $((SECONDS - start)) s)"
  else
    echo "FAIL nccl_absent_peer (exit $rc; 124 means it hung)"; tail -3 "$logs/nccl_absent_peer.log"
    failures=$((failures + 1))
  fi
fi

# Single-GPU equivalence: the same 20 MLP steps on the GPU (NCCL, gradients all-reduced in
# place in GPU memory in 2 buckets overlapped with backward) and on the CPU (Gloo) end at the
# same parameters within float tolerance.
# The third run reduces the GPU's buckets with Gloo through their pinned host mirror (what several
# ranks sharing one GPU use) instead of NCCL.
for device in cuda cpu cuda_gloo; do
  flags=(--device "${device%_gloo}"); [[ $device == *_gloo ]] && flags+=(--collective gloo)
  rm -rf "$logs/equivalence-$device"
  check "equivalence_$device" trainer "${flags[@]}" --model mlp --batches 16 --steps 20 \
    --optimizer sgd --momentum 0.9 --lr 0.05 --checkpoint-dir "$logs/equivalence-$device" \
    --bucket-elements 1024
done
if wanted equivalence_cuda; then
  grep -q '"overlapped_buckets":[1-9]' "$logs/equivalence_cuda.log" && echo "NCCL buckets overlapped with backward" ||
    { echo "FAIL: no NCCL bucket started during backward"; failures=$((failures + 1)); }
fi
check equivalence_compare python3 "$(dirname "$0")/compare_checkpoints.py" \
  "$logs/equivalence-cuda/checkpoint-000000000020.bin" "$logs/equivalence-cpu/checkpoint-000000000020.bin" 1e-4
wanted equivalence_compare && cat "$logs/equivalence_compare.log"
check equivalence_gloo_compare python3 "$(dirname "$0")/compare_checkpoints.py" \
  "$logs/equivalence-cuda_gloo/checkpoint-000000000020.bin" "$logs/equivalence-cpu/checkpoint-000000000020.bin" 1e-4
wanted equivalence_gloo_compare && cat "$logs/equivalence_gloo_compare.log"

# Out of memory on purpose: a ResNet-18 batch far beyond the GPU's memory (about 22 MB a sample
# at 224x224: 8192 need ~180 GB; 4096, ~90 GB, ran out on an 80 GB H100 but fits in an H200's
# 141 GB). The trainer must catch it, retry in micro-steps, finish its steps and say so in its log.
wanted out_of_memory && {
check out_of_memory_recovered trainer --device cuda --model resnet18 --image-size 224 \
  --batches 8192 --steps 3 --dataset-size 8192 --threads 16
grep -E 'out of memory|"finished"' "$logs/out_of_memory_recovered.log" | cut -c1-400
grep -c 'out of memory: retrying' "$logs/out_of_memory_recovered.log" | sed 's/^/out-of-memory retries logged: /'
grep -q 'out of memory: retrying' "$logs/out_of_memory_recovered.log" || { echo "FAIL: no out-of-memory retry logged"; failures=$((failures + 1)); }
}

# c(b) for b = 1..512: the small CNN and ResNet-18 (CIFAR-sized and ImageNet-sized inputs).
check curve_cnn "$bin/fulcrum-step-curve" --device cuda --model cnn --image-size 32 --hidden 64 --threads 8
wanted curve_cnn && cp "$logs/curve_cnn.log" "$out/curve_cnn.json"
check curve_resnet18_32 "$bin/fulcrum-step-curve" --device cuda --model resnet18 --image-size 32 --threads 8
wanted curve_resnet18_32 && cp "$logs/curve_resnet18_32.log" "$out/curve_resnet18_32.json"
check curve_resnet18_224 "$bin/fulcrum-step-curve" --device cuda --model resnet18 --image-size 224 \
  --threads 8 --repeats 5
wanted curve_resnet18_224 && cp "$logs/curve_resnet18_224.log" "$out/curve_resnet18_224.json"

# The data path against PyTorch (issue 22): packed uint8 data, torchvision ResNet-18 as
# TorchScript, at 224x224 and 32x32 (bench/trainer/gpu_data_bench.py).
# In fp32, fp32 channels_last and bf16 channels_last (issue 23), both sides alike; and, as a
# reference, PyTorch running torchvision's eager module with the batches on the GPU.
check data_path python3 "$(dirname "$0")/../../../bench/trainer/gpu_data_bench.py" \
  --trainer "$bin/fulcrum-trainer" --eager-baseline "$work/data_path"
wanted data_path && { sed -n '/^{/,$p' "$logs/data_path.log" >"$out/data_path.json"; grep '^partial' "$logs/data_path.log" | cut -c1-600; }

# Real heterogeneity (issue 25): three trainers on this one GPU, each limited by MPS to its own
# share of the multiprocessors, optimal against equal (bench/trainer/gpu_mps_bench.py).
check mps_balance python3 "$(dirname "$0")/../../../bench/trainer/gpu_mps_bench.py" \
  --bin "$bin" --workdir "$logs/mps"
wanted mps_balance && sed -n '/^{/,$p' "$logs/mps_balance.log" >"$out/mps_balance.json"

# The fulcrum Python package (issue 26) on this GPU with this machine's CUDA torch: its wheels
# from the bundle (DIR/python/wheels), a world of one under fulcrum-coordinator, NCCL, CUDA-event
# timings, the series, parameters against plain PyTorch (tests/python/gpu_runtime_check.py).
python_dir="$bin/../python"
if { wanted python_runtime || wanted python_bench; } && [[ -d $python_dir ]]; then
  python3 -m pip install --quiet --no-index --find-links "$python_dir/wheels" \
    --target "$work/python-deps" grpcio protobuf prometheus-client >"$logs/python_deps.log" 2>&1
fi
if wanted python_runtime && [[ -d $python_dir ]]; then
  check python_runtime env PYTHONPATH="$python_dir:$work/python-deps" \
    python3 "$python_dir/gpu_runtime_check.py" "$bin/fulcrum-coordinator" "$logs/python-runtime"
  sed -n '/^{/,$p' "$logs/python_runtime.log" >"$out/python_runtime.json"
fi
# Its benchmark on this GPU: the package, fulcrum-trainer and PyTorch DDP (equal split), three
# ranks each on this one GPU under MPS at 100/35/12% of the multiprocessors, the CNN at 64
# channels on 3x32x32 (bench/trainer/python_runtime_bench.py --device cuda).
if wanted python_bench && [[ -d $python_dir ]]; then
  check python_bench env PYTHONPATH="$python_dir:$work/python-deps" \
    python3 "$(dirname "$0")/../../../bench/trainer/python_runtime_bench.py" --device cuda \
    --mps-percentages 100,35,12 --bin-dir "$bin" --hidden 64 --global-batch 1536 --rounds 1
  sed -n '/^{/,$p' "$logs/python_bench.log" >"$out/python_bench.json"
fi

keep_logs
echo "gpu checks: $failures failed"
exit $((failures > 0))
