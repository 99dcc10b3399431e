#!/usr/bin/python3
"""One rank of bench/trainer/python_runtime_bench.py: a user's ordinary DDP script on the fulcrum
Python package, training fulcrum-trainer's `--model cnn` twin (ddp_baseline.make_model) on the
same synthetic data (ddp_baseline.SyntheticData, generated per batch inside the step as the
trainer and the DDP baseline do), SGD lr 0.05 momentum 0.9, one torch thread.

The job comes from FULCRUM_* variables (the launcher's coordinator); the emulated slowdown from
FULCRUM_EMULATED_SLOWDOWN (EMULATION: a sleep after compute, benchmarks only).

--device cuda: the model on cuda:0, gradients all-reduced by --backend (gloo where several ranks
share one GPU: NCCL refuses that), and the whole dataset made once and kept on the GPU (as
ddp_baseline.py does there), so a step's indices select rows on the device."""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import ddp_baseline as twin  # noqa: E402
import fulcrum  # noqa: E402


class Positions(torch.utils.data.Dataset):
    """Sample i is its index; the collate function makes the batch (vectorised, as the baseline)."""

    def __init__(self, size: int):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return index


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--dataset-size", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--backend", default=None, help="default: fulcrum.init's choice")
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(arguments.seed)

    job = fulcrum.init(device=arguments.device, backend=arguments.backend)
    model = twin.make_model(torch, arguments.hidden, arguments.classes).to(job.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    state = fulcrum.State(model=model, optimizer=optimizer)
    data = twin.SyntheticData(np, (3, arguments.image_size, arguments.image_size),
                              arguments.classes, arguments.seed)
    collate = data.batches_on(torch, job.device, arguments.dataset_size)

    @job.elastic(state)
    def train(state):
        # No per-step buffer broadcast, as the baseline and fulcrum-trainer.
        ddp = job.distributed(state.model, broadcast_buffers=False)
        for inputs, labels in job.data_loader(Positions(arguments.dataset_size),
                                              steps=arguments.steps, seed=arguments.seed,
                                              collate_fn=collate):
            job.backward(F.cross_entropy(ddp(inputs), labels))
            state.optimizer.step()
            state.optimizer.zero_grad(set_to_none=True)

    train()
    job.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
