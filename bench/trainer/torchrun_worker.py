#!/usr/bin/python3
"""One elastic worker for membership_bench.py's PyTorch baseline, started by torchrun.

  torchrun --rdzv-backend c10d ... bench/trainer/torchrun_worker.py --log FILE --checkpoint-dir DIR
      [--global-batch 96] [--image-size 16] [--hidden 16] [--checkpoint-every 10]
      [--collective-timeout-seconds 30]

What torchelastic expects of a worker: it reads RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT
from the agent, forms a gloo process group, resumes from the newest checkpoint, trains with
DistributedDataParallel, and checkpoints (rank 0, every --checkpoint-every steps). On a
membership change the agent kills every worker and starts them again in the new world; the
checkpoint is how training survives that. Each completed step appends one JSON line to --log
with its wall time, so the benchmark can see when training stopped and resumed.

The model is fulcrum-trainer's `--model cnn` (trainer_image/trainer/model/model.cc: a 3x3 stem, two
residual blocks with BatchNorm, global mean pool, linear head), SGD with momentum, on random
synthetic batches of 3 x S x S images: the same work per step as the trainer's. Each rank takes
B // world samples (equal batches, as DDP does). Needs Debian's python3-torch (/usr/bin/python3).
"""
import argparse
import datetime
import glob
import json
import os
import time

import torch
import torch.distributed as dist

# The CNN twin of fulcrum-trainer's --model cnn, shared with the DDP baseline (this folder is
# on sys.path: torchrun runs this file as a script).
from ddp_baseline import make_model


def latest_checkpoint(directory):
    paths = sorted(glob.glob(os.path.join(directory, "checkpoint-*.pt")),
                   key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0]))
    return paths[-1] if paths else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--log", required=True)
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--global-batch", type=int, default=96)
    parser.add_argument("--image-size", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--collective-timeout-seconds", type=float, default=30.0)
    args = parser.parse_args()

    torch.set_num_threads(1)  # as fulcrum-trainer's default --threads 1
    started = time.time()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.collective_timeout_seconds))
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))

    torch.manual_seed(0)  # every rank starts from the same parameters, as DDP requires
    model = make_model(torch, args.hidden, args.classes)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step = 0
    path = latest_checkpoint(args.checkpoint_dir)
    if path is not None:
        state = torch.load(path)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    local_batch = args.global_batch // world
    generator = torch.Generator().manual_seed(1000 * rank + restart)
    with open(args.log, "a") as log:
        log.write(json.dumps({"event": "started", "rank": rank, "world": world, "restart": restart,
                              "resumed_step": step, "pid": os.getpid(), "unix_time": time.time(),
                              "startup_seconds": time.time() - started}) + "\n")
        log.flush()
        while True:
            inputs = torch.randn(local_batch, 3, args.image_size, args.image_size, generator=generator)
            targets = torch.randint(0, args.classes, (local_batch,), generator=generator)
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(ddp(inputs), targets)
            loss.backward()  # DDP all-reduces the gradients here
            optimizer.step()
            log.write(json.dumps({"step": step, "unix_time": time.time(), "rank": rank, "world": world,
                                  "restart": restart, "pid": os.getpid()}) + "\n")
            log.flush()
            step += 1
            if rank == 0 and step % args.checkpoint_every == 0:
                temporary = os.path.join(args.checkpoint_dir, f".checkpoint-{step}.tmp")
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "step": step}, temporary)
                os.replace(temporary, os.path.join(args.checkpoint_dir, f"checkpoint-{step}.pt"))
                for old in sorted(glob.glob(os.path.join(args.checkpoint_dir, "checkpoint-*.pt")),
                                  key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0]))[:-3]:
                    os.remove(old)


if __name__ == "__main__":
    main()
