"""A user's training script as the tests run it: a small seeded model and dataset trained with
fulcrum.init(), fulcrum.State and @job.elastic, job.distributed(), job.data_loader() and
job.backward(). Saves its final parameters (and the agreed step and plan) to --out.

    python3 runtime_worker.py --out FILE [--static-rank R --batches 3,5,8 --rendezvous H:P]
                              [--optimizer sgd|adam] [--steps N | --epochs E]

Without --static-rank it joins the coordinator the environment names (FULCRUM_*)."""

from __future__ import annotations

import argparse
import logging
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import fulcrum  # noqa: E402

FEATURES, CLASSES, SAMPLES = 8, 4, 200
SEED = 7  # of the sample order


def make_dataset(samples: int = SAMPLES,
                 features: int = FEATURES) -> torch.utils.data.TensorDataset:
    generator = torch.Generator().manual_seed(1234)
    inputs = torch.randn(samples, features, generator=generator)
    labels = torch.randint(0, CLASSES, (samples,), generator=generator)
    return torch.utils.data.TensorDataset(inputs, labels)


def make_model(hidden: int = 16, features: int = FEATURES) -> torch.nn.Module:
    torch.manual_seed(99)
    return torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.Tanh(),
                               torch.nn.Linear(hidden, CLASSES))


def make_optimizer(name: str, parameters) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(parameters, lr=0.1, momentum=0.9)
    return torch.optim.Adam(parameters, lr=0.01)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--static-rank", type=int)
    parser.add_argument("--batches", default="")
    parser.add_argument("--rendezvous", default="")
    parser.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
    parser.add_argument("--steps", type=int)
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--samples", type=int, default=SAMPLES)
    parser.add_argument("--bad-loss", action="store_true", help="pass a per-sample loss")
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--features", type=int, default=FEATURES)
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(1)

    static = None
    if arguments.static_rank is not None:
        static = fulcrum.StaticGroup(rank=arguments.static_rank,
                                     batches=[int(b) for b in arguments.batches.split(",")],
                                     rendezvous=arguments.rendezvous)
    job = fulcrum.init(static_group=static)
    network = make_model(arguments.hidden, arguments.features)
    state = fulcrum.State(model=network,
                          optimizer=make_optimizer(arguments.optimizer, network.parameters()))
    loss_function = torch.nn.CrossEntropyLoss(reduction="none" if arguments.bad_loss else "mean")
    dataset = make_dataset(arguments.samples, arguments.features)

    @job.elastic(state)
    def train(state):
        model = job.distributed(state.model)
        loader = job.data_loader(dataset, steps=arguments.steps, epochs=arguments.epochs,
                                 seed=SEED)
        for inputs, labels in loader:
            inputs, labels = inputs.to(job.device), labels.to(job.device)
            loss = loss_function(model(inputs), labels)
            job.backward(loss)
            job.apply_learning_rate(state.optimizer)  # the job's rate (live edits, adaptive B)
            state.optimizer.step()
            state.optimizer.zero_grad()

    train()
    torch.save({"parameters": [p.detach().clone() for p in network.parameters()],
                "step": job.step, "cursor": job.cursor, "batches": job.batches,
                "rank": job.rank, "pid": os.getpid(), "loss": job.last_loss,
                "generation": job.generation, "device": str(job.device),
                "backend": job.backend}, arguments.out)
    job.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
