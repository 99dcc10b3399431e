#!/usr/bin/python3
"""PyTorch DDP baseline for adaptive_batch_bench.py, with EMULATED heterogeneity: fulcrum-trainer's
built-in MLP twin (64 -> hidden -> hidden -> classes, ReLU) on a packed dataset, plain
DistributedDataParallel over Gloo with equal local batches, SGD momentum 0.9, one epoch-wise
permutation shared by the ranks, the same emulated sleep as ddp_baseline.py (factor - 1 times
the compute's CPU time, where DDP starts the all-reduce), and rank 0 evaluating the whole
evaluation set every --eval-every steps. Each rank writes JSON lines ("started", "evaluated" with
loss and accuracy, "finished") to WORKDIR/rank-R.log, with ISO timestamps as fulcrum-trainer's.
"""
import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts", "lib"))
from free_port import free_port  # noqa: E402 (below the ephemeral range)


def log_line(handle, msg, **fields):
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
    handle.write(json.dumps({"ts": stamp.replace("+00:00", "Z"), "msg": msg, **fields}) + "\n")
    handle.flush()


def worker(args):
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
    from fulcrum.pack import load

    torch.set_num_threads(1)
    log = open(os.path.join(args.workdir, f"rank-{args.rank}.log"), "w")
    log_line(log, "started", rank=args.rank)
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world,
                            timeout=datetime.timedelta(seconds=120))
    train = {name: torch.from_numpy(np.array(array)) for name, array in load(args.train).items()}
    evaluation = {name: torch.from_numpy(np.array(array))
                  for name, array in load(args.eval).items()}
    features, classes = train["input"].shape[1], int(train["label"].max()) + 1
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(features, args.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(args.hidden, args.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(args.hidden, classes))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    slowdown = args.slowdown_list[args.rank]
    clock = {"wall": 0.0, "cpu": 0.0, "slept": False}

    def slowed_allreduce(state, bucket):
        if not clock["slept"]:
            clock["slept"] = True
            wall = time.perf_counter() - clock["wall"]
            cpu = time.process_time() - clock["cpu"]
            future = default_hooks.allreduce_hook(state, bucket)
            if slowdown > 1.0:
                time.sleep((slowdown - 1.0) * max(0.0, min(wall, cpu)))
            return future
        return default_hooks.allreduce_hook(state, bucket)
    ddp.register_comm_hook(None, slowed_allreduce)

    samples = len(train["label"])
    local = args.batch // args.world
    steps_per_epoch = samples // args.batch
    # fulcrum-trainer's --lr-schedule cosine (no warmup, final factor 0): from lr at the first
    # step to 0 at the last.
    last = max(1, steps_per_epoch * args.epochs - 1)

    def rate_factor(step_done):
        if args.lr_schedule != "cosine":
            return 1.0
        return 0.5 * (1.0 + math.cos(math.pi * min(step_done, last) / last))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, rate_factor)
    step = 0
    for epoch in range(args.epochs):
        order = torch.randperm(samples, generator=torch.Generator().manual_seed(epoch))
        for index in range(steps_per_epoch):
            begin = index * args.batch + args.rank * local
            chosen = order[begin:begin + local]
            clock.update(wall=time.perf_counter(), cpu=time.process_time(), slept=False)
            loss = torch.nn.functional.cross_entropy(ddp(train["input"][chosen]),
                                                     train["label"][chosen])
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step % args.eval_every == 0 and args.rank == 0:
                with torch.no_grad():
                    logits = model(evaluation["input"])
                    eval_loss = torch.nn.functional.cross_entropy(logits, evaluation["label"])
                    accuracy = (logits.argmax(1) == evaluation["label"]).double().mean()
                log_line(log, "evaluated", rank=0, step=step, loss=eval_loss.item(),
                         accuracy=accuracy.item())
    dist.barrier()
    log_line(log, "finished", rank=args.rank, step=step)
    log.close()
    # Not destroy_process_group: Gloo's teardown can hang once a peer has exited (seen here);
    # every rank is past the barrier, nothing is left to say.
    os._exit(0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True)
    parser.add_argument("--eval", required=True)
    parser.add_argument("--slowdowns", default="1,2,4")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--lr-schedule", choices=["constant", "cosine"], default="constant")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.slowdown_list = [float(x) for x in args.slowdowns.split(",")]
    args.world = len(args.slowdown_list)
    if args.rank >= 0:
        worker(args)
        return
    environment = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                       OMP_NUM_THREADS="1")
    children = [subprocess.Popen([sys.executable, os.path.abspath(__file__), *sys.argv[1:],
                                  "--rank", str(rank)], env=environment)
                for rank in range(args.world)]
    codes = [child.wait(timeout=1800) for child in children]
    if any(codes):
        raise SystemExit(f"a rank failed: exit codes {codes}; logs in {args.workdir}")


if __name__ == "__main__":
    main()
