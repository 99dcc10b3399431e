#!/usr/bin/env python3
"""Benchmark of the trainer's data path on the CPU: the prefetching loader, and data waits kept
apart from compute.

  bench/trainer/data_bench.py [--build-dir DIR] [--samples 2048] [--image-size 64]
                              [--batch 64] [--steps 60] [--read-us 1500] [--threads 1]

A packed dataset of uint8 images [3, S, S] and int64 labels is written with fulcrum-pack
(python/). Part 1: one fulcrum-trainer (static group of one, the small CNN) trains on it with
the loader on (--loader-threads 2) and off (0), on fast storage (the page cache) and on
EMULATED slow storage (--emulated-read-us-per-sample: every read sleeps that long per sample).
Steady samples/s and the data-wait fraction (time waiting for a batch over step time) over the
last 70% of steps. Part 2: two trainers of equal speed under a coordinator (scripts/local-train,
optimal policy, loader off so that the wait is visible), one of them on EMULATED slow storage,
against the same run on fast storage: the slow-storage trainer's final share of the global
batch, and its data-wait fraction. Prints one JSON object with the goals and what was measured:
- the loader hides slow storage whose reads take less than a step's compute: loader-on
  samples/s on slow storage >= 0.9x on fast storage;
- only-storage-slow does not move the split: the slow-storage trainer's final share stays
  within 0.1 of 1/2 (a wait counted as compute would have taken samples off it).
CPU figures only; nothing here ran on a GPU.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


from json_lines import read_json_lines  # this folder is on sys.path: run as a script
from packed_images import free_port, write_random_images

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP_FRACTION = 0.3


def steady(sample_log):
    """samples/s and data-wait fraction over the last 70% of a trainer's committed steps."""
    lines = read_json_lines(sample_log)
    lines = lines[int(len(lines) * SKIP_FRACTION):]
    seconds = sum(line["step_seconds"] for line in lines)
    samples = sum(len(line["indices"]) for line in lines)
    wait = sum(line.get("data_wait_seconds", 0.0) for line in lines)
    compute = sum(line["compute_seconds"] for line in lines)
    return {"samples_per_second": samples / seconds if seconds else None,
            "data_wait_fraction": wait / seconds if seconds else None,
            "compute_seconds_per_step": compute / len(lines) if lines else None,
            "steps_measured": len(lines)}


def single_trainer(args, dataset, workdir, loader_threads, read_us):
    name = f"loader{loader_threads}-read{read_us}"
    sample_log = os.path.join(workdir, name + ".samples")
    command = [os.path.join(args.build_dir, "trainer_image/trainer/fulcrum-trainer"),
               "--world-size", "1", "--rank", "0",
               "--rendezvous", f"127.0.0.1:{free_port()}", "--batches", str(args.batch),
               "--steps", str(args.steps), "--dataset", dataset, "--model", "cnn",
               "--hidden", "16", "--threads", str(args.threads),
               "--loader-threads", str(loader_threads),
               "--emulated-read-us-per-sample", str(read_us), "--sample-log", sample_log]
    with open(os.path.join(workdir, name + ".log"), "w") as log:
        subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=True, timeout=1800)
    result = steady(sample_log)
    result.update({"loader_threads": loader_threads, "emulated_read_us_per_sample": read_us})
    return result


def two_trainers(args, dataset, workdir, read_us):
    command = [sys.executable, os.path.join(ROOT, "scripts/local-train"), "--build-dir",
               args.build_dir, "--slowdowns", "1,1", "--steps", str(args.steps * 2),
               "--global-batch", str(2 * args.batch), "--model", "cnn", "--quiet",
               "--workdir", os.path.join(workdir, f"pair-read{read_us}")]
    if read_us:
        command += ["--rank-args", f"1:--emulated-read-us-per-sample {read_us}"]
    command += ["--", "--dataset", dataset, "--hidden", "16", "--threads", str(args.threads),
                "--loader-threads", "0"]
    os.makedirs(os.path.join(workdir, f"pair-read{read_us}"), exist_ok=True)
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"local-train failed: {done.stderr[-2000:]}")
    summary = json.loads(done.stdout)
    slow = summary["trainers"][1]
    return {"emulated_read_us_per_sample_rank1": read_us,
            "samples_per_second": summary["samples_per_second"],
            "final_local_batches": [t["final_local_batch"] for t in summary["trainers"]],
            "rank1_final_share": slow["final_local_batch"] / (2 * args.batch),
            "data_wait_fractions": [t["data_wait_fraction"] for t in summary["trainers"]],
            "plan_changes": summary["plan_changes"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--read-us", type=int, default=1500,
                        help="EMULATED slow storage: microseconds per sample read")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per trainer")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="fulcrum-data-bench-")
    dataset = os.path.join(workdir, "dataset")
    write_random_images(dataset, args.samples, args.image_size, seed=3)
    runs = [single_trainer(args, dataset, workdir, threads, read_us)
            for read_us in (0, args.read_us) for threads in (2, 0)]
    by = {(r["loader_threads"], r["emulated_read_us_per_sample"]): r for r in runs}
    fast_pair = two_trainers(args, dataset, workdir, 0)
    slow_pair = two_trainers(args, dataset, workdir, args.read_us)
    hidden = (by[(2, args.read_us)]["samples_per_second"] /
              by[(2, 0)]["samples_per_second"])
    print(json.dumps({
        "device": "cpu",
        "emulated_slow_storage": True,
        "dataset": {"samples": args.samples, "image": [3, args.image_size, args.image_size],
                    "dtype": "uint8"},
        "batch": args.batch, "steps": args.steps, "torch_threads": args.threads,
        "load_average": os.getloadavg(),
        "single_trainer": runs,
        "pair": {"fast_storage": fast_pair, "rank1_slow_storage": slow_pair},
        "goals": {
            "loader_hides_slow_storage": {"goal": ">= 0.9", "measured": hidden,
                                          "met": hidden >= 0.9},
            "slow_storage_keeps_the_split": {
                "goal": "rank 1's share within 0.1 of 0.5",
                "measured": slow_pair["rank1_final_share"],
                "met": abs(slow_pair["rank1_final_share"] - 0.5) <= 0.1},
        },
        "workdir": workdir,
    }, indent=2))


if __name__ == "__main__":
    main()
