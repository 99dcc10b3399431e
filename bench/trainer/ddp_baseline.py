#!/usr/bin/python3
"""PyTorch DDP baseline for bench/trainer/trainer_bench.py, with EMULATED heterogeneity.

  /usr/bin/python3 bench/trainer/ddp_baseline.py [--slowdowns 1,2,4] [--steps 150]
      [--global-batch 96] [--image-size 32] [--hidden 16] [--threads 1] [--broadcast-buffers]

Runs plain data parallelism as PyTorch ships it: one process per rank on loopback,
torch.nn.parallel.DistributedDataParallel over the gloo backend, every rank the same local
batch (B / world). What it trains is fulcrum-trainer's `--model cnn` twin (trainer_image/
trainer/model.cc: stem conv, two residual blocks with BatchNorm, mean pool, linear head; the
same 9,962 parameters at hidden 16), on the same synthetic data (dataset.cc's SplitMix64 and
Box-Muller samples and teacher labels, bit for bit up to the labels' float64 summation order;
generated inside the step as the trainer does), with the same optimizer (SGD, lr 0.05,
momentum 0.9) and the same emulated slowdown: after a rank's forward and backward it sleeps
(factor - 1) x the CPU time that compute used, capped by its wall time
(EmulatedSlowdown::SleepSeconds). The sleep happens in a DDP communication hook, where DDP
starts the gradient all-reduce: before starting it, as fulcrum-trainer and the Python package
sleep before their last bucket goes out (a slow GPU finishes backward late; issue 25).
--slowdown-after-allreduce-start sleeps after starting it instead, so the all-reduce runs during
the sleep: the order fulcrum-trainer had before 6f762ea, which hid a slowed rank's all-reduce.

Fairness, stated: every worker runs with torch.set_num_threads(--threads) (1, as
fulcrum-trainer's default --threads 1), glibc's malloc is given the settings the trainer
applies with mallopt (KeepFreedCpuMemory), both are Debian's libtorch 1.13.1, and DDP's
buffer broadcast is off by default (fulcrum-trainer does not synchronise BatchNorm statistics
every step either; --broadcast-buffers turns DDP's default back on). DDP keeps its default
25 MB buckets: one bucket for this model, as fulcrum-trainer's 1M-float default.

Prints one JSON object on stdout, measured as scripts/local-train measures a Fulcrum run:
samples/s = the sum of global batches ÷ the sum of per-step times (per step the slowest
rank's), over the steps after the first 30%. Also the wall-clock rate over the same steps.
Needs Debian's python3-torch: run it with /usr/bin/python3 (pyenv's python3 has no torch).

On a GPU (--device cuda): every rank on cuda:0, DDP over gloo (NCCL refuses two ranks on one
device), a pool of --dataset-size synthetic samples made once and kept on the GPU (as
fulcrum-trainer's pool, so the host's generator is not what is timed), each step ended by a
synchronize; --mps-percentages gives rank r CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (real
heterogeneity under an MPS daemon the caller started; slowdowns stay 1).
"""
import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import tempfile
import time

from child_processes import wait_for_ranks
from mps_daemon import PERCENTAGE_VARIABLE

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "scripts", "lib"))
from free_port import free_port  # noqa: E402 (below the ephemeral range)

# Constants of trainer_image/trainer/data/dataset.cc and sample_order.cc.
GOLDEN_GAMMA = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
TEACHER_SALT = 0x7EAC4E57
ORDER_MULTIPLIER = 0x2545F4914F6CDD1D
MASK64 = (1 << 64) - 1

# glibc tunables equal to fulcrum-trainer's mallopt calls in cpu_allocator.cc: keep freed
# memory in the process instead of returning it to the kernel after every step.
MALLOC_ENVIRONMENT = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
                      "MALLOC_TOP_PAD_": str(64 << 20)}


def splitmix64_scalar(state):
    """One SplitMix64 draw in Python integers: (new state, value)."""
    state = (state + GOLDEN_GAMMA) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * MIX1) & MASK64
    z = ((z ^ (z >> 27)) * MIX2) & MASK64
    return state, z ^ (z >> 31)


def epoch_order(dataset_size, seed, epoch):
    """SampleOrder::EpochOrder: the per-epoch Fisher-Yates permutation."""
    order = list(range(dataset_size))
    state = (seed * ORDER_MULTIPLIER + epoch) & MASK64
    for i in range(dataset_size, 1, -1):
        state, value = splitmix64_scalar(state)
        j = value % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


class SyntheticData:
    """dataset.cc's SyntheticDataset in numpy: row r's features are the standard normals of the
    SplitMix64 stream seeded seed * golden + r; its label is the argmax of a fixed random linear
    teacher. Vectorised: draw k of a stream seeded s is mix(s + k * golden), so every draw of
    every row is computed at once."""

    def __init__(self, np, shape, classes, seed):
        self.np = np
        self.shape = shape
        self.features = 1
        for dimension in shape:
            self.features *= dimension
        self.seed = seed
        teacher = self._normals(np.array([seed ^ TEACHER_SALT], dtype=np.uint64), classes * self.features)
        self.teacher = teacher.reshape(classes, self.features).astype(np.float64).T.copy()

    def _normals(self, states, count):
        np = self.np
        pairs = (count + 1) // 2
        with np.errstate(over="ignore"):
            draws = np.arange(1, 2 * pairs + 1, dtype=np.uint64) * np.uint64(GOLDEN_GAMMA)
            z = states[:, None] + draws[None, :]
            z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX1)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX2)
            z ^= z >> np.uint64(31)
        z = z.reshape(len(states), pairs, 2)
        u1 = ((z[..., 0] >> np.uint64(11)).astype(np.float64) + 1.0) * 2.0 ** -53
        u2 = (z[..., 1] >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
        radius = np.sqrt(-2.0 * np.log(u1))
        angle = 2.0 * math.pi * u2
        out = np.empty((len(states), pairs, 2), dtype=np.float32)
        out[..., 0] = radius * np.cos(angle)
        out[..., 1] = radius * np.sin(angle)
        return out.reshape(len(states), 2 * pairs)[:, :count]

    def batches_on(self, torch, device, dataset_size):
        """A function of a step's indices returning (inputs, labels) as tensors on `device`. On
        a GPU the whole dataset is made once and kept there, so the host's generator is not what
        a step times; on the CPU each batch is generated inside the step, as the trainer does."""
        if device.type != "cuda":
            def generated(indices):
                inputs, labels = self.get(indices)
                return torch.from_numpy(inputs), torch.from_numpy(labels)
            return generated
        inputs, labels = (torch.from_numpy(part).to(device) for part in self.get(range(dataset_size)))

        def selected(indices):
            rows = torch.tensor(indices, device=device)
            return inputs.index_select(0, rows), labels.index_select(0, rows)
        return selected

    def get(self, indices):
        np = self.np
        with np.errstate(over="ignore"):
            states = np.uint64(self.seed) * np.uint64(GOLDEN_GAMMA) + np.asarray(indices, dtype=np.uint64)
        x = self._normals(states, self.features)
        labels = np.argmax(x.astype(np.float64) @ self.teacher, axis=1)
        return x.reshape(len(indices), *self.shape), labels.astype(np.int64)


def make_model(torch, channels, classes):
    """model.cc's SmallResNet (--model cnn), layer for layer and in the same registration order."""
    nn = torch.nn

    class ResidualBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(channels)
            self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(channels)

        def forward(self, x):
            return torch.relu(x + self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))))

    class SmallResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, channels, 3, padding=1)
            self.block1 = ResidualBlock()
            self.block2 = ResidualBlock()
            self.head = nn.Linear(channels, classes)

        def forward(self, x):
            x = self.block2(self.block1(torch.relu(self.stem(x))))
            return self.head(x.mean((2, 3)))

    return SmallResNet()


def equal_batches(global_batch, world):
    """B / world each; the first B mod world ranks take one more when B does not divide."""
    return [global_batch // world + (1 if r < global_batch % world else 0) for r in range(world)]


def worker(args):
    """One DDP rank. Writes its per-step times as JSON to --result."""
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world,
                            timeout=datetime.timedelta(seconds=120))
    slowdown = args.slowdown_list[args.rank]
    batches = equal_batches(args.global_batch, args.world)
    data = SyntheticData(np, (3, args.image_size, args.image_size), args.classes, args.seed)
    epochs = (args.steps * args.global_batch) // args.dataset_size + 1
    # Orders are built before training (the trainer's C++ takes ~20 us per epoch; Python ~10 ms,
    # which would otherwise land on a few steps of the baseline only).
    orders = [epoch_order(args.dataset_size, args.seed, e) for e in range(epochs)]
    model = make_model(torch, args.hidden, args.classes).to(device)
    parameters = sum(p.numel() for p in model.parameters())
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, broadcast_buffers=args.broadcast_buffers,
        device_ids=[0] if device.type == "cuda" else None)
    batch = data.batches_on(torch, device, args.dataset_size)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)

    # The emulated slowdown, where DDP starts the all-reduce (backward has produced the bucket's
    # gradients; with one bucket, the end of compute). By default in fulcrum-trainer's order: a
    # slow device's gradients are late, so the rank sleeps, then starts the all-reduce (the
    # trainer's last bucket, one bucket for this model, goes out after its sleep).
    # --slowdown-after-allreduce-start starts it first, so it runs while the rank sleeps.
    clock = {"wall": 0.0, "cpu": 0.0, "slept": False, "compute": 0.0}

    def slowed_allreduce(state, bucket):
        if clock["slept"]:
            return default_hooks.allreduce_hook(state, bucket)
        clock["slept"] = True
        wall = time.perf_counter() - clock["wall"]
        cpu = time.process_time() - clock["cpu"]
        sleep = (slowdown - 1.0) * max(0.0, min(wall, cpu)) if slowdown > 1.0 else 0.0
        future = default_hooks.allreduce_hook(state, bucket) if args.slowdown_after_allreduce_start else None
        if sleep > 0:
            time.sleep(sleep)
        clock["compute"] = wall + sleep
        return future if future is not None else default_hooks.allreduce_hook(state, bucket)

    ddp.register_comm_hook(None, slowed_allreduce)
    step_seconds, compute_seconds, step_end = [], [], []
    begin = sum(batches[:args.rank])
    for step in range(args.steps):
        start = time.perf_counter()
        clock.update(wall=start, cpu=time.process_time(), slept=False)
        positions = range(step * args.global_batch + begin, step * args.global_batch + begin + batches[args.rank])
        indices = [orders[p // args.dataset_size][p % args.dataset_size] for p in positions]
        inputs, labels = batch(indices)
        optimizer.zero_grad(set_to_none=True)
        # Mean over the local batch; DDP averages over ranks: the global batch's mean gradient.
        loss = torch.nn.functional.cross_entropy(ddp(inputs), labels)
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        end = time.perf_counter()
        step_seconds.append(end - start)
        compute_seconds.append(clock["compute"])
        step_end.append(time.time())
    checksum = float(sum(p.double().sum() for p in model.parameters()))
    dist.barrier()
    dist.destroy_process_group()
    with open(args.result, "w") as handle:
        json.dump({"rank": args.rank, "slowdown": slowdown, "local_batch": batches[args.rank],
                   "parameters": parameters, "step_seconds": step_seconds,
                   "compute_seconds": compute_seconds, "step_end": step_end,
                   "final_loss": float(loss.item()), "checksum": checksum}, handle)


def steady_throughput(step_samples, step_seconds, skip_fraction=0.3):
    """scripts/local-train's measure: samples / seconds over the steps after the first 30%."""
    first = int(len(step_seconds) * skip_fraction)
    seconds = sum(step_seconds[first:])
    return sum(step_samples[first:]) / seconds if seconds > 0 else 0.0


def launch(args):
    """Starts one process per rank (MASTER_ADDR/PORT rendezvous on loopback), waits, sums up."""
    workdir = tempfile.mkdtemp(prefix="fulcrum-ddp-baseline-")
    environment = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                       OMP_NUM_THREADS=str(args.threads), **MALLOC_ENVIRONMENT)
    children = []
    results = [os.path.join(workdir, f"rank-{rank}.json") for rank in range(args.world)]
    for rank in range(args.world):
        command = [sys.executable, os.path.abspath(__file__), "--worker", "--rank", str(rank),
                   "--result", results[rank]] + args.passthrough
        log = open(os.path.join(workdir, f"rank-{rank}.log"), "w")
        own = ({PERCENTAGE_VARIABLE: str(args.mps_percentage_list[rank])}
               if args.mps_percentage_list else {})
        children.append(subprocess.Popen(command, env={**environment, **own}, stdout=log,
                                         stderr=subprocess.STDOUT))
    wait_for_ranks(children, args.timeout, workdir, "ddp_baseline", results=results)
    ranks = [json.load(open(path)) for path in results]
    steps = args.steps
    per_step = [max(rank["step_seconds"][s] for rank in ranks) for s in range(steps)]
    samples = [args.global_batch] * steps
    first = int(steps * 0.3)
    ends = [min(rank["step_end"][s] for rank in ranks) for s in range(steps)]
    wall = (sum(samples[first + 1:]) / (ends[-1] - ends[first])) if steps - first > 1 else 0.0
    summary = {
        "emulated_heterogeneity": any(f != 1 for f in args.slowdown_list),
        "device": args.device,
        "mps_active_thread_percentages": args.mps_percentage_list,
        "system": "pytorch_ddp",
        "torch": args.torch_version,
        "backend": "gloo",
        "model": f"cnn (hidden {args.hidden}, 3x{args.image_size}x{args.image_size})",
        "parameters": ranks[0]["parameters"],
        "global_batch": args.global_batch,
        "local_batches": [rank["local_batch"] for rank in ranks],
        "steps": steps,
        "slowdowns": args.slowdown_list,
        "threads_per_process": args.threads,
        "broadcast_buffers": args.broadcast_buffers,
        "emulated_sleep": "after the all-reduce starts" if args.slowdown_after_allreduce_start
                          else "before the all-reduce starts (fulcrum-trainer's order)",
        "samples_per_second": steady_throughput(samples, per_step),
        "wall_samples_per_second": wall,
        "median_compute_seconds": [sorted(rank["compute_seconds"][first:])[(steps - first) // 2] for rank in ranks],
        "parameters_identical": len({rank["checksum"] for rank in ranks}) == 1,
        "final_loss": ranks[0]["final_loss"],
        "workdir": workdir,
    }
    print(json.dumps(summary, indent=2))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slowdowns", default="1,2,4", help="EMULATED slowdown per rank")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--global-batch", type=int, default=96)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--dataset-size", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    parser.add_argument("--broadcast-buffers", action="store_true",
                        help="DDP's default: broadcast BatchNorm buffers from rank 0 every step")
    parser.add_argument("--slowdown-after-allreduce-start", action="store_true",
                        help="sleep after starting the all-reduce (default: before, as fulcrum-trainer)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--mps-percentages", default=None,
                        help="on cuda, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE per rank, e.g. 100,35,12")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.slowdown_list = [float(x) for x in args.slowdowns.split(",")]
    args.world = len(args.slowdown_list)
    if any(not 1 <= x <= 100 for x in args.slowdown_list):
        parser.error("--slowdowns: every factor must be in [1, 100]")
    if args.steps < 2 or args.global_batch < args.world:
        parser.error("--steps must be >= 2 and --global-batch >= the number of ranks")
    args.mps_percentage_list = ([int(x) for x in args.mps_percentages.split(",")]
                                if args.mps_percentages else None)
    if args.mps_percentage_list and (args.device != "cuda" or
                                     len(args.mps_percentage_list) != args.world):
        parser.error("--mps-percentages: one per rank (as --slowdowns), with --device cuda")
    # What the launcher hands its workers: every option but the launcher's own.
    args.passthrough = ["--slowdowns", args.slowdowns, "--steps", str(args.steps),
                        "--global-batch", str(args.global_batch), "--image-size", str(args.image_size),
                        "--hidden", str(args.hidden), "--classes", str(args.classes),
                        "--dataset-size", str(args.dataset_size), "--seed", str(args.seed),
                        "--lr", str(args.lr), "--momentum", str(args.momentum), "--threads", str(args.threads),
                        "--device", args.device]
    if args.broadcast_buffers:
        args.passthrough.append("--broadcast-buffers")
    if args.slowdown_after_allreduce_start:
        args.passthrough.append("--slowdown-after-allreduce-start")
    return args


def main():
    args = parse_args()
    if args.worker:
        worker(args)
        # Its result is written and closed. Leave without the interpreter's teardown: with
        # Debian's torch 1.13 a rank sometimes spun in a Gloo thread at exit after
        # destroy_process_group (seen: 100% CPU for 10 minutes, the launcher waiting on it).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    try:
        import torch
    except ImportError:
        raise SystemExit("ddp_baseline: no torch for " + sys.executable +
                         "; run it with Debian's /usr/bin/python3 (apt-get install python3-torch)")
    args.torch_version = torch.__version__
    launch(args)


if __name__ == "__main__":
    main()
