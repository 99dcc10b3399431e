#!/usr/bin/env python3
"""Real heterogeneity on one NVIDIA GPU: three fulcrum-trainer processes under MPS with their own
share of the GPU's multiprocessors (issue 25's GPU benchmark).

  gpu_mps_bench.py --bin DIR [--percentages 100,35,12] [--policies optimal,equal]
                   [--global-batch 1536] [--image-size 64] [--steps 150] [--workdir DIR]

Starts the MPS control daemon (nvidia-cuda-mps-control -d, its pipes in a folder of its own),
then for each policy runs scripts/local-train with fulcrum-coordinator and three trainers on
cuda:0, each client limited by CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (100, 35 and 12 by default), the
built-in ResNet-18 at 3x64x64 on synthetic data made on the GPU, gradients all-reduced by Gloo
through host memory (NCCL refuses two ranks on one device). No slowdown is emulated: the speed
differences are the GPU's own under its MPS limits. Stops the daemon at the end.

Prints one JSON object: per policy local-train's summary (samples/s over the steps after the
first 30%, the coordinator's efficiency T(best)/T(current) under its model and that model's
calibration, plan changes, every trainer's final batch), and optimal/equal. Every figure is a
GPU figure.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from mps_daemon import PERCENTAGE_VARIABLE, gpu_name, mps_daemon  # this folder is on sys.path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def local_train(args, policy, environment, workdir):
    percentages = args.percentages.split(",")
    command = [sys.executable, os.path.join(ROOT, "scripts/local-train"), "--bin-dir", args.bin,
               "--slowdowns", ",".join("1" for _ in percentages), "--policy", policy,
               "--model", "resnet18", "--global-batch", str(args.global_batch),
               "--steps", str(args.steps), "--workdir", workdir, "--quiet", "--timeout", "600"]
    for rank, percentage in enumerate(percentages):
        command += ["--rank-env", f"{rank}:{PERCENTAGE_VARIABLE}={percentage}"]
    command += ["--", "--device", "cuda", "--collective", "gloo",
                "--image-size", str(args.image_size), "--dataset-size", str(args.dataset_size)]
    finished = subprocess.run(command, env=environment, capture_output=True, text=True,
                              timeout=700)
    if finished.returncode != 0:
        return {"error": f"local-train exited {finished.returncode}",
                "stderr": finished.stderr[-2000:], "workdir": workdir}
    summary = json.loads(finished.stdout)
    summary["mps_active_thread_percentages"] = [int(p) for p in percentages]
    return summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", required=True, help="fulcrum-coordinator and fulcrum-trainer")
    parser.add_argument("--percentages", default="100,35,12")
    parser.add_argument("--policies", default="optimal,equal")
    parser.add_argument("--global-batch", type=int, default=1536)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--dataset-size", type=int, default=65536)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="fulcrum-gpu-mps-bench-")
    os.makedirs(workdir, exist_ok=True)
    report = {"gpu": gpu_name(), "emulated": False,
              "heterogeneity": f"MPS: {PERCENTAGE_VARIABLE} per trainer",
              "model": f"resnet18 3x{args.image_size}x{args.image_size}",
              "global_batch": args.global_batch, "steps": args.steps, "policies": {}}
    with mps_daemon(os.path.join(workdir, "mps-log")) as (environment, started):
        report["mps_daemon"] = started
        for policy in args.policies.split(","):
            report["policies"][policy] = local_train(
                args, policy, environment, os.path.join(workdir, policy))
    rates = {p: s.get("samples_per_second") for p, s in report["policies"].items()}
    if rates.get("optimal") and rates.get("equal"):
        report["optimal_over_equal"] = rates["optimal"] / rates["equal"]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
