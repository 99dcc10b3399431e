#!/usr/bin/env python3
"""The fulcrum Python package on one GPU (issue 26's GPU line), run by
tests/trainer_image/gpu/run_gpu_checks.sh on a machine with CUDA torch 2.x:

    gpu_runtime_check.py COORDINATOR_BINARY WORK_DIR

A world of one (two NCCL ranks cannot share one GPU) under a real fulcrum-coordinator (plaintext
on loopback): runtime_worker.py trains 60 steps with fulcrum.init() choosing CUDA and NCCL, step
reports timed with CUDA events, its Prometheus series served. Prints one JSON object and exits
non-zero when a check fails: the device and backend, the GPU's name the coordinator recorded,
compute times from the reports, the gradient statistics, the parameters against one plain
PyTorch process on the same GPU (1e-4), and the series."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import runtime_worker as worker  # noqa: E402

sys.path.insert(0, str(HERE.parents[1] / "scripts" / "lib"))
from free_port import free_port  # noqa: E402
from fulcrum.sample_order import SampleOrder  # noqa: E402

STEPS = 60
# GPU_CHECK_DEVICE=cpu: a dry run of this script on a machine without a GPU (Gloo, CPU).
DEVICE = os.environ.get("GPU_CHECK_DEVICE", "cuda")
TOKEN = "gpu-check-token"
JOB = "gpu/python"


def main() -> int:
    coordinator_binary, work = sys.argv[1], Path(sys.argv[2])
    work.mkdir(parents=True, exist_ok=True)
    (work / "tokens").write_text(f"{JOB} {TOKEN}\n")
    (work / "token").write_text(TOKEN + "\n")
    port, metrics_port = free_port(), free_port()
    coordinator = subprocess.Popen(
        [coordinator_binary, "--listen", f"127.0.0.1:{port}", "--job-token-file",
         str(work / "tokens"), "--global-batch", "64", "--min-workers", "1", "--insecure",
         "true", "--state-file", str(work / "state.json")],
        stdout=open(work / "coordinator.log", "w"), stderr=subprocess.STDOUT)
    checks: dict[str, bool] = {}
    try:
        time.sleep(1.0)
        env = dict(os.environ, FULCRUM_COORDINATOR=f"127.0.0.1:{port}", FULCRUM_JOB=JOB,
                   FULCRUM_TOKEN_FILE=str(work / "token"), FULCRUM_COORDINATOR_INSECURE="true",
                   POD_NAME="gpu-0", NODE_NAME="gpu-node", POD_IP="127.0.0.1",
                   FULCRUM_METRICS_PORT=str(metrics_port),
                   FULCRUM_SAMPLE_LOG=str(work / "samples.jsonl"))
        trainer = subprocess.Popen(
            [sys.executable, str(HERE / "runtime_worker.py"), "--out", str(work / "out.pt"),
             "--steps", str(STEPS), "--hidden", "256"],
            env=env, stdout=open(work / "worker.log", "w"), stderr=subprocess.STDOUT)
        series = ""
        while trainer.poll() is None and not series:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                            timeout=2) as got:
                    text = got.read().decode()
                    series = text if "fulcrum_trainer_step{" in text else ""
            except OSError:
                time.sleep(0.2)
        checks["exit 0"] = trainer.wait(timeout=300) == 0
        state = json.loads((work / "state.json").read_text())["jobs"][0]
    finally:
        coordinator.terminate()
        coordinator.wait(timeout=30)
    samples = [json.loads(line) for line in (work / "samples.jsonl").read_text().splitlines()]
    member = state["members"][0]
    device_name = torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu"
    checks["the coordinator heard the GPU's name"] = member["gpu_product"] == \
        device_name.replace(" ", "-")
    checks["compute times from CUDA events"] = member["compute_seconds"] > 0
    checks["gradient statistics reported"] = all(
        line["local_gradient_squared_norm"] > 0 for line in samples)
    checks["Prometheus series served"] = "fulcrum_trainer_step_seconds_bucket" in series

    # One plain PyTorch process on the same GPU, the job's sample order, global batch 64.
    torch.manual_seed(0)
    dataset = worker.make_dataset()
    order = SampleOrder(len(dataset), seed=worker.SEED)
    model = worker.make_model(256).to(DEVICE)
    optimizer = worker.make_optimizer("sgd", model.parameters())
    for step in range(STEPS):
        inputs, labels = dataset[order.indices(range(step * 64, (step + 1) * 64))]
        torch.nn.functional.cross_entropy(model(inputs.to(DEVICE)),
                                          labels.to(DEVICE)).backward()
        optimizer.step()
        optimizer.zero_grad()
    result = torch.load(work / "out.pt", map_location=DEVICE)
    checks[f"trained on {DEVICE}"] = (result["device"].startswith(DEVICE) and result["backend"]
                                      == ("nccl" if DEVICE == "cuda" else "gloo"))
    difference = max((a - b.detach()).abs().max().item()
                     for a, b in zip(result["parameters"], model.parameters()))
    checks["parameters within 1e-4 of plain PyTorch"] = difference < 1e-4
    print(json.dumps({"device": device_name, "torch": torch.__version__,
                      "max_parameter_difference": difference,
                      "median_compute_seconds": sorted(l["compute_seconds"] for l in samples)[
                          len(samples) // 2],
                      "checks": checks}, indent=2))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
