#!/usr/bin/env python3
"""fulcrum-trainer's data path against PyTorch on one NVIDIA GPU (issue 22's GPU benchmark).

  gpu_data_bench.py --trainer BIN/fulcrum-trainer OUT_DIR [--sizes 224,32] [--steps N]
                    [--eager-baseline]
                    [--loader-threads 4] [--formats fp32,fp32-cl,bf16-cl]

Run on the GPU machine (tests/trainer_image/gpu/run_gpu_checks.sh runs it as check data_path),
with the CUDA torch for Python and torchvision. For each input size (3x224x224 at batch 128,
3x32x32 at batch 256), on the same GPU, the same packed uint8 dataset (written here with
python/'s fulcrum.pack) and the same torchvision ResNet-18 as TorchScript (10 classes), fp32,
contiguous, normalised on the GPU:
- fulcrum-trainer: --model torchscript --dataset DIR, NCCL world of one, its loader threads;
- PyTorch DDP (NCCL, world of one) with a DataLoader: 8 workers, pinned memory, non_blocking
  copies, uint8 batches cast and normalised on the GPU;
- PyTorch DDP with the batches already on the GPU (uint8, normalised in the step).
Steady samples/s over the steps after the first 30%, by wall clock (torch.cuda.synchronize at
both ends for PyTorch; the trainer's sample log's unix_time for fulcrum-trainer). Goals:
fulcrum >= 1.0x the DataLoader pipeline and >= 0.9x batches-on-GPU, at both sizes (issue 22).

--eager-baseline adds PyTorch with the batches on the GPU running torchvision's eager module
(same initial weights) rather than the TorchScript file: the model a PyTorch user would run, as
a reference beside the same-model comparison.

Each size runs in each of --formats, both sides alike (issue 23: >= 0.9x PyTorch in each):
fp32 (contiguous, as above), fp32-cl (channels_last weights and inputs: the trainer's
--channels-last true, PyTorch's module.to(memory_format=torch.channels_last) and inputs made
channels_last) and bf16-cl (channels_last and bfloat16 autocast: --precision bf16, PyTorch's
torch.autocast("cuda", torch.bfloat16)). Prints one JSON object; every figure is a GPU figure,
nothing is emulated.
"""
import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from packed_images import free_port, write_random_images  # this folder is on sys.path

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SETTINGS = {224: {"batch": 128, "samples": 2048}, 32: {"batch": 256, "samples": 50000}}
SKIP = 0.3
# Per format: (fulcrum-trainer flags, channels_last, autocast dtype).
FORMATS = {
    "fp32": ([], False, None),
    "fp32-cl": (["--channels-last", "true"], True, None),
    "bf16-cl": (["--channels-last", "true", "--precision", "bf16"], True, torch.bfloat16),
}


def resnet18():
    """torchvision's ResNet-18 for 10 classes, the same initial weights every call."""
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.resnet18(num_classes=10)


def write_model(path):
    torch.jit.script(resnet18()).save(path)


def fulcrum_run(args, dataset, model, batch, steps, out, data_format):
    sample_log = os.path.join(out, f"fulcrum-{os.path.basename(dataset)}-{data_format}.samples")
    if os.path.exists(sample_log):
        os.remove(sample_log)
    command = [args.trainer, "--world-size", "1", "--rank", "0",
               "--rendezvous", f"127.0.0.1:{free_port()}", "--batches", str(batch),
               "--steps", str(steps), "--device", "cuda", "--collective", "nccl",
               "--model", "torchscript", "--torchscript", model, "--dataset", dataset,
               "--normalize-mean", ",".join(map(str, MEAN)),
               "--normalize-std", ",".join(map(str, STD)), "--lr", "0.01",
               "--loader-threads", str(args.loader_threads), "--threads", "8",
               "--sample-log", sample_log] + FORMATS[data_format][0]
    with open(sample_log + ".log", "w") as log:
        subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=True, timeout=1800)
    lines = [json.loads(line) for line in open(sample_log)]
    window = lines[int(len(lines) * SKIP):]
    seconds = window[-1]["unix_time"] - window[0]["unix_time"]
    samples = sum(len(line["indices"]) for line in window[1:])
    wait = sum(line["data_wait_seconds"] for line in window)
    steps_seconds = sum(line["step_seconds"] for line in window)
    walls = [b["unix_time"] - a["unix_time"] for a, b in zip(window, window[1:])]
    return {"samples_per_second": samples / seconds,
            "data_wait_fraction": wait / steps_seconds,
            "compute_seconds_per_step": sum(l["compute_seconds"] for l in window) / len(window),
            # Where a step's wall time goes (medians, ms): compute by the device's clock, then
            # from its end to the summed control values, to the update queued, and the rest
            # (reading the step's scalars, the logs, the report, the next batch's hand-over).
            "median_ms": {"wall": 1e3 * statistics.median(walls),
                          **{key: 1e3 * statistics.median(line[key] for line in window)
                             for key in ("step_seconds", "compute_seconds", "comm_seconds",
                                         "after_compute_seconds", "data_wait_seconds")
                             if key in window[0]}}}


class PackedImages(torch.utils.data.Dataset):
    def __init__(self, directory):
        self.directory = directory
        self.images = self.labels = None
        self.length = len(np.load(os.path.join(directory, "label.npy"), mmap_mode="r"))

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        if self.images is None:  # opened in each worker process
            self.images = np.load(os.path.join(self.directory, "image.npy"), mmap_mode="r")
            self.labels = np.load(os.path.join(self.directory, "label.npy"), mmap_mode="r")
        return torch.from_numpy(np.array(self.images[index])), int(self.labels[index])


def pytorch_runs(dataset, model_path, batch, steps, data_format, eager=False):
    device = torch.device("cuda", 0)
    _, channels_last, autocast = FORMATS[data_format]
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    # Eager: torchvision's module itself, the same initial weights as the scripted file.
    module = (resnet18() if eager else torch.jit.load(model_path)).to(
        device, memory_format=memory_format)
    ddp = torch.nn.parallel.DistributedDataParallel(module, device_ids=[0])
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1)

    def step(images, labels):
        x = images.float().div_(255).sub_(mean).div_(std).contiguous(memory_format=memory_format)
        with (torch.autocast("cuda", dtype=autocast) if autocast else contextlib.nullcontext()):
            loss = F.cross_entropy(ddp(x), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    def timed(batches):
        skip = int(steps * SKIP)
        for index, (images, labels) in enumerate(batches):
            if index == skip:
                torch.cuda.synchronize()
                start = time.perf_counter()
            step(images, labels)
        torch.cuda.synchronize()
        return batch * (steps - skip) / (time.perf_counter() - start)

    loader = torch.utils.data.DataLoader(
        PackedImages(dataset), batch_size=batch, shuffle=True, num_workers=8, pin_memory=True,
        drop_last=True, persistent_workers=True, prefetch_factor=2)

    def from_loader():
        done = 0
        while True:
            for images, labels in loader:
                yield images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
                done += 1
                if done == steps:
                    return

    resident = [(torch.randint(0, 256, (batch, 3) + tuple(PackedImages(dataset)[0][0].shape[1:]),
                               dtype=torch.uint8, device=device),
                 torch.randint(0, 10, (batch,), device=device)) for _ in range(8)]
    if eager:
        return {"batches_on_gpu_eager": timed(resident[i % 8] for i in range(steps))}
    return {"dataloader": timed(from_loader()),
            "batches_on_gpu": timed(resident[i % 8] for i in range(steps))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trainer", required=True)
    parser.add_argument("out")
    parser.add_argument("--sizes", default="224,32")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--loader-threads", type=int, default=4)
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--eager-baseline", action="store_true",
                        help="also PyTorch with the batches on the GPU and torchvision's eager "
                             "module (not the scripted file the trainer runs): a reference, "
                             "not the goal's baseline")
    args = parser.parse_args()
    formats = args.formats.split(",")
    if not set(formats) <= set(FORMATS):
        parser.error(f"--formats: each of {', '.join(FORMATS)}")
    os.makedirs(args.out, exist_ok=True)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("nccl", rank=0, world_size=1)
    model = os.path.join(args.out, "resnet18.pt")
    write_model(model)
    results = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "emulated": False, "sizes": {}}
    for size in (int(s) for s in args.sizes.split(",")):
        settings = SETTINGS[size]
        dataset = os.path.join(args.out, f"packed-{size}")
        write_random_images(dataset, settings["samples"], size, seed=1)
        for data_format in formats:
            fulcrum = fulcrum_run(args, dataset, model, settings["batch"], args.steps, args.out,
                                  data_format)
            pytorch = pytorch_runs(dataset, model, settings["batch"], args.steps, data_format)
            if args.eager_baseline:
                pytorch.update(pytorch_runs(dataset, model, settings["batch"], args.steps,
                                            data_format, eager=True))
            results["sizes"].setdefault(f"3x{size}x{size}", {})[data_format] = {
                "batch": settings["batch"], "fulcrum": fulcrum, "pytorch": pytorch,
                "fulcrum_over_dataloader": fulcrum["samples_per_second"] / pytorch["dataloader"],
                "fulcrum_over_batches_on_gpu":
                    fulcrum["samples_per_second"] / pytorch["batches_on_gpu"],
                **({"fulcrum_over_batches_on_gpu_eager":
                    fulcrum["samples_per_second"] / pytorch["batches_on_gpu_eager"]}
                   if args.eager_baseline else {}),
                "goals": {"over_dataloader": ">= 1.0", "over_batches_on_gpu": ">= 0.9"}}
            # Partial results survive a run cut short (not a line of the final object's).
            print("partial", json.dumps({"size": size, "format": data_format,
                              **results["sizes"][f"3x{size}x{size}"][data_format]}), flush=True)
    dist.destroy_process_group()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
