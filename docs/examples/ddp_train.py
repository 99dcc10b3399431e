"""A complete PyTorch DDP training script on Fulcrum (docs/python-runtime.md).

Trains a small classifier on a synthetic dataset; every rank gets its own batch from the job's
plan, survives members leaving and joining, and rank 0 saves the model at the end. As a
HeteroTrainingJob (crds/examples/python-ddp.yaml, runtime: python) the operator sets everything
it needs; outside a cluster:

    FULCRUM_COORDINATOR=... FULCRUM_JOB=ns/name FULCRUM_TOKEN_FILE=... python3 ddp_train.py \
        --epochs 3 --output model.pt
"""

import argparse
import logging
import os

import torch
import torch.nn.functional as F

import fulcrum


def synthetic_dataset(samples: int, features: int, classes: int = 4):
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(samples, features, generator=generator)
    teacher = torch.randn(features, classes, generator=generator)
    return torch.utils.data.TensorDataset(inputs, (inputs @ teacher).argmax(dim=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, help="default: the job's training.epochs/.steps")
    parser.add_argument("--output", help="default: model.pt in the job's output.path, else here")
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    job = fulcrum.init()  # joins the job: coordinator, token and CA from the pod's environment
    torch.manual_seed(0)  # the same initial weights on every rank (DDP broadcasts rank 0's too)
    net = torch.nn.Sequential(torch.nn.Linear(arguments.features, arguments.hidden),
                              torch.nn.ReLU(), torch.nn.Linear(arguments.hidden, 4))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=100, gamma=0.5)
    state = fulcrum.State(model=net, optimizer=optimizer, scheduler=scheduler)
    dataset = synthetic_dataset(arguments.samples, arguments.features)

    @job.elastic(state)
    def train(state):
        model = job.distributed(state.model)
        for inputs, labels in job.data_loader(dataset, epochs=arguments.epochs):
            loss = F.cross_entropy(model(inputs), labels)
            job.backward(loss)
            # The job's rate, once it sets one (a live edit of training.learningRate, or an
            # adaptive global batch's): the scheduler goes on from it.
            job.apply_learning_rate(state.optimizer, state.scheduler)
            state.optimizer.step()
            state.optimizer.zero_grad()
            state.scheduler.step()
            if job.rank == 0 and job.step % 50 == 0:
                logging.info("step %d: loss %.4f over %d samples (mine %d)", job.step,
                             job.last_loss, job.global_batch, job.local_batch)

    train()
    if job.rank == 0:
        output = arguments.output or os.path.join(job.spec.output_dir or ".", "model.pt")
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        torch.save({"model": net.state_dict(), "step": job.step}, output)
        logging.info("saved %s at step %d (loss %.4f)%s", output, job.step, job.last_loss,
                     " (stopped early)" if job.stopping else "")
    job.shutdown()


if __name__ == "__main__":
    main()
