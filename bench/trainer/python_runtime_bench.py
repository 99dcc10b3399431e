#!/usr/bin/python3
"""The fulcrum Python package against fulcrum-trainer and PyTorch DDP, with EMULATED
heterogeneity (issue 26's benchmark).

  /usr/bin/python3 bench/trainer/python_runtime_bench.py [--build-dir build] [--steps 150]
      [--global-batch 96] [--image-size 32] [--hidden 16] [--rounds 3]

Three ranks at emulated slowdowns 1, 2 and 4 (a sleep after each step's compute, in proportion
to its CPU time: no GPU is slowed) train fulcrum-trainer's small CNN (`--model cnn`, hidden 16,
CIFAR-sized 3x32x32 synthetic inputs, SGD-momentum) three ways, one run of each per round,
interleaved (reversed every other round) so the shared machine's drift hits them alike:
- python: a user's DDP script on the fulcrum package (python_runtime_worker.py, the model's
  PyTorch twin from ddp_baseline.py) under the real fulcrum-coordinator, optimal policy;
- trainer: fulcrum-trainer under the same coordinator (scripts/local-train, as trainer_bench.py);
- ddp: plain PyTorch DDP with equal local batches (ddp_baseline.py).
Each is measured as scripts/local-train measures a run: the sum of global batches over the sum
of per-step times (per step the slowest rank's), over the steps after the first 30%; and the
wall-clock rate over the same steps. Prints one JSON object: every round, the medians, the ratios
python/ddp and python/trainer per round and their medians, and the goals (python >= 1.6x DDP,
python within 10% of fulcrum-trainer) with what was measured. Debian's python3-torch for all.

On a GPU (--device cuda --mps-percentages 100,35,12 [--bin-dir DIR]): the same three systems with
every rank on cuda:0 under an MPS daemon started here, rank r limited to the r-th percentage of
the multiprocessors (real heterogeneity, nothing emulated: slowdowns 1), gradients all-reduced by
Gloo (NCCL refuses two ranks on one device), the synthetic data made once and kept on the GPU
by the Python ranks and the DDP baseline (fulcrum-trainer keeps its own pool). --bin-dir names a
folder with fulcrum-coordinator and fulcrum-trainer side by side (a CUDA bundle); the machine's
own python3 runs the Python ranks and the baseline.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from child_processes import kill_all, wait_for_ranks  # noqa: E402
from ddp_baseline import MALLOC_ENVIRONMENT  # noqa: E402
from json_lines import read_json_lines  # noqa: E402
from mps_daemon import PERCENTAGE_VARIABLE, gpu_name, mps_daemon  # noqa: E402
from rounds import interleaved_rounds  # noqa: E402
from trainer_bench import ROOT, SKIP_FRACTION, SLOWDOWNS, run, run_ddp  # noqa: E402

TOKEN = "python-runtime-bench-token"
JOB = "bench/python"


def steady(summary_steps, global_batches, seconds, ends):
    """local-train's measure and the wall-clock rate, over the steps after the first 30%."""
    first = int(summary_steps * SKIP_FRACTION)
    total = sum(seconds[first:])
    wall_span = ends[-1] - ends[first]
    return (sum(global_batches[first:]) / total if total > 0 else 0.0,
            sum(global_batches[first + 1:]) / wall_span if wall_span > 0 else 0.0)


def run_python(coordinator, steps, global_batch, image_size, hidden, slowdowns, device="cpu",
               rank_environment=(), timeout=900.0):
    """Three python_runtime_worker.py ranks under fulcrum-coordinator (optimal policy); on cuda
    they all-reduce with Gloo, rank r with rank_environment[r] in its environment."""
    workdir = tempfile.mkdtemp(prefix="fulcrum-python-runtime-bench-")
    with open(os.path.join(workdir, "tokens"), "w") as handle:
        handle.write(f"{JOB} {TOKEN}\n")
    with open(os.path.join(workdir, "token"), "w") as handle:
        handle.write(TOKEN + "\n")
    slowdowns = [float(f) for f in slowdowns.split(",")]
    coordinator_log = os.path.join(workdir, "coordinator.log")
    children = []
    try:
        children.append(subprocess.Popen(
            [coordinator,
             "--listen", "127.0.0.1:0", "--job-token-file", os.path.join(workdir, "tokens"),
             "--global-batch", str(global_batch), "--min-workers", str(len(slowdowns)),
             "--policy", "optimal", "--min-gain", "0.05", "--settle-ms", "300",
             "--state-file", os.path.join(workdir, "state.json"), "--insecure", "true"],
            stdout=open(coordinator_log, "w"), stderr=subprocess.STDOUT))
        port, deadline = None, time.time() + 30
        while port is None and time.time() < deadline:
            for line in read_json_lines(coordinator_log):
                if line.get("msg") == "listening":
                    port = line["port"]
            time.sleep(0.05)
        if port is None:
            raise SystemExit(f"the coordinator did not start; see {coordinator_log}")
        for rank, factor in enumerate(slowdowns):
            pod = f"python-{rank}"
            environment = dict(
                os.environ, OMP_NUM_THREADS="1",
                PYTHONPATH=os.pathsep.join(
                    [os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH", "")]),
                FULCRUM_COORDINATOR=f"127.0.0.1:{port}", FULCRUM_JOB=JOB,
                FULCRUM_TOKEN_FILE=os.path.join(workdir, "token"),
                FULCRUM_COORDINATOR_INSECURE="true", POD_NAME=pod, NODE_NAME=pod,
                POD_IP="127.0.0.1", FULCRUM_EMULATED_SLOWDOWN=str(factor),
                FULCRUM_SAMPLE_LOG=os.path.join(workdir, pod + ".samples"), **MALLOC_ENVIRONMENT,
                **(rank_environment[rank] if rank_environment else {}))
            children.append(subprocess.Popen(
                [sys.executable, os.path.join(HERE, "python_runtime_worker.py"), "--steps",
                 str(steps), "--image-size", str(image_size), "--hidden", str(hidden),
                 "--device", device, *(["--backend", "gloo"] if device == "cuda" else [])],
                env=environment, stdout=open(os.path.join(workdir, pod + ".log"), "w"),
                stderr=subprocess.STDOUT))
        wait_for_ranks(children[1:], timeout, workdir, "python_runtime_bench")
    finally:
        kill_all(children)
    by_step = {}
    for rank in range(len(slowdowns)):
        for line in read_json_lines(os.path.join(workdir, f"python-{rank}.samples")):
            entry = by_step.setdefault(line["step"], {"batch": line["global_batch"],
                                                      "seconds": 0.0, "end": line["unix_time"]})
            entry["seconds"] = max(entry["seconds"], line["step_seconds"])
            entry["end"] = min(entry["end"], line["unix_time"])
    ordered = [by_step[step] for step in sorted(by_step)]
    rate, wall = steady(len(ordered), [e["batch"] for e in ordered], [e["seconds"] for e in ordered],
                        [e["end"] for e in ordered])
    final_batches = {}  # by emulated slowdown (by rank on a GPU, where they are all 1)
    for rank, factor in enumerate(slowdowns):
        last = read_json_lines(os.path.join(workdir, f"python-{rank}.samples"))[-1]
        final_batches[f"rank{rank}" if device == "cuda" else f"x{factor:g}"] = \
            last["batches"][last["rank"]]
    return {"samples_per_second": rate, "wall_samples_per_second": wall, "steps": len(ordered),
            "final_batches": final_batches, "workdir": workdir}


def generate_protocol_messages():
    """In a source checkout the package's protocol messages exist only once generated (the
    tests' conftest.py does it for pytest): make them before the ranks import the package."""
    subprocess.run([sys.executable, "-m", "fulcrum.stubs"], cwd=os.path.join(ROOT, "python"),
                   check=True, stdout=subprocess.DEVNULL)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--global-batch", type=int, default=96)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--mps-percentages", default=None,
                        help=f"on cuda: {PERCENTAGE_VARIABLE} per rank, e.g. 100,35,12")
    parser.add_argument("--bin-dir", default=None,
                        help="fulcrum-coordinator and fulcrum-trainer side by side "
                             "(default: --build-dir's)")
    args = parser.parse_args()
    generate_protocol_messages()
    if args.device == "cuda" and not args.mps_percentages:
        parser.error("--device cuda needs --mps-percentages (the ranks' heterogeneity)")
    percentages = args.mps_percentages.split(",") if args.mps_percentages else []
    slowdowns = ",".join("1" for _ in percentages) if percentages else SLOWDOWNS
    rank_environment = [{PERCENTAGE_VARIABLE: p} for p in percentages]
    coordinator = (os.path.join(args.bin_dir, "fulcrum-coordinator") if args.bin_dir else
                   os.path.join(args.build_dir,
                                "operator/cmd/fulcrum_coordinator/fulcrum-coordinator"))
    launcher_args = ["--bin-dir", args.bin_dir] if args.bin_dir else []
    for rank, percentage in enumerate(percentages):
        launcher_args += ["--rank-env", f"{rank}:{PERCENTAGE_VARIABLE}={percentage}"]
    trainer_flags = ["--device", "cuda", "--collective", "gloo"] if args.device == "cuda" else []
    ddp_flags = (["--device", "cuda", "--mps-percentages", args.mps_percentages]
                 if args.device == "cuda" else [])
    systems = ["python", "trainer", "ddp"]

    def run_one(system, round_index):
        load = os.getloadavg()[0]
        if system == "python":
            summary = run_python(coordinator, args.steps, args.global_batch, args.image_size,
                                 args.hidden, slowdowns, args.device, rank_environment)
        elif system == "trainer":
            summary = run(args.build_dir, "optimal", args.steps, args.global_batch,
                          args.image_size, hidden=args.hidden, extra=trainer_flags,
                          slowdowns=slowdowns, launcher_args=launcher_args)
        else:
            summary = run_ddp(sys.executable, args.steps, args.global_batch, args.image_size,
                              args.hidden, slowdowns=slowdowns, extra=ddp_flags)
        kept = {"samples_per_second": round(summary["samples_per_second"], 1),
                **({"final_batches": summary["final_batches"]}
                   if "final_batches" in summary else {}),
                "wall_samples_per_second": round(summary.get("wall_samples_per_second") or 0.0, 1),
                "load_average_before": round(load, 2)}
        print(f"round {round_index}: {system} {kept}", file=sys.stderr)
        return kept
    if args.device == "cuda":
        with mps_daemon(tempfile.mkdtemp(prefix="fulcrum-mps-log-")) as (environment, _):
            os.environ.update(environment)  # every child is an MPS client
            runs = interleaved_rounds(systems, args.rounds, run_one)
    else:
        runs = interleaved_rounds(systems, args.rounds, run_one)

    def median(system, key="samples_per_second"):
        return statistics.median(r[key] for r in runs[system])

    def median_of(values):
        measured = [value for value in values if value is not None]
        return statistics.median(measured) if measured else None

    def ratios(other, key="samples_per_second"):
        # None where a run measured no rate (too few steps after the skipped 30%, e.g. --steps 20).
        return [round(p[key] / o[key], 3) if o[key] > 0 else None
                for p, o in zip(runs["python"], runs[other])]
    over_ddp, over_trainer = ratios("ddp"), ratios("trainer")
    if args.device == "cuda":
        device = (f"GPU {gpu_name()}: 3 processes on cuda:0 under MPS, "
                  f"{PERCENTAGE_VARIABLE} {args.mps_percentages}; nothing emulated; Gloo")
    else:
        device = ("CPU (no GPU figure): 3 processes, 1 torch thread each, on "
                  f"{os.cpu_count()} CPUs; slowdowns {SLOWDOWNS} are emulated sleeps")
    report = {
        "emulated_heterogeneity": args.device != "cuda",
        "device": device,
        "setup": {"model": f"cnn (hidden {args.hidden}, 3x{args.image_size}x{args.image_size})",
                  "global_batch": args.global_batch, "steps": args.steps, "rounds": args.rounds,
                  "measure": "sum of global batches / sum of per-step times (slowest rank), "
                             "steps after the first 30%; wall: the same steps by the clock"},
        "runs": runs,
        "medians": {system: {"samples_per_second": round(median(system), 1),
                             "wall_samples_per_second":
                                 round(median(system, "wall_samples_per_second"), 1)}
                    for system in systems},
        "python_over_ddp": {"rounds": over_ddp, "median": median_of(over_ddp),
                            "median_wall_clock": median_of(ratios(
                                "ddp", "wall_samples_per_second"))},
        "python_over_trainer": {"rounds": over_trainer, "median": median_of(over_trainer),
                                "median_wall_clock": median_of(ratios(
                                    "trainer", "wall_samples_per_second"))},
    }
    over_ddp_median = report["python_over_ddp"]["median"]
    over_trainer_median = report["python_over_trainer"]["median"]
    report["goals"] = {
        "python >= 1.6x ddp": {"measured": over_ddp_median,
                               "met": over_ddp_median is not None and over_ddp_median >= 1.6},
        "python within 10% of fulcrum-trainer": {
            "measured": over_trainer_median,
            "met": over_trainer_median is not None and over_trainer_median >= 0.9},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
