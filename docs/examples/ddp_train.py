"""A complete PyTorch DDP training script on Fulcrum (docs/python-runtime.md).

Trains a small classifier on a synthetic dataset; every rank gets its own batch from the job's
plan, survives members leaving and joining, and rank 0 saves the model at the end:

    FULCRUM_COORDINATOR=... FULCRUM_JOB=ns/name FULCRUM_TOKEN_FILE=... python3 ddp_train.py \
        --epochs 3 --output model.pt
"""

import argparse
import logging

import torch
import torch.nn.functional as F

import fulcrum


def synthetic_dataset(samples: int = 4096, features: int = 32, classes: int = 4):
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(samples, features, generator=generator)
    teacher = torch.randn(features, classes, generator=generator)
    return torch.utils.data.TensorDataset(inputs, (inputs @ teacher).argmax(dim=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--output", default="model.pt")
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    job = fulcrum.init()  # joins the job: coordinator, token and CA from the pod's environment
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=100, gamma=0.5)
    state = fulcrum.State(model=net, optimizer=optimizer, scheduler=scheduler)
    dataset = synthetic_dataset()

    @job.elastic(state)
    def train(state):
        model = job.distributed(state.model)
        for inputs, labels in job.data_loader(dataset, epochs=arguments.epochs, seed=0):
            loss = F.cross_entropy(model(inputs), labels)
            job.backward(loss)
            state.optimizer.step()
            state.optimizer.zero_grad()
            state.scheduler.step()
            if job.rank == 0 and job.step % 50 == 0:
                logging.info("step %d: loss %.4f over %d samples (mine %d)", job.step,
                             job.last_loss, job.global_batch, job.local_batch)

    train()
    if job.rank == 0:
        torch.save({"model": net.state_dict(), "step": job.step}, arguments.output)
        logging.info("saved %s at step %d (loss %.4f)%s", arguments.output, job.step,
                     job.last_loss, " (stopped early)" if job.stopping else "")
    job.shutdown()


if __name__ == "__main__":
    main()
