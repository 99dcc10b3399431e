#!/usr/bin/env python3
"""Benchmark of the whole training system on loopback, with EMULATED heterogeneity.

  bench/trainer/trainer_bench.py [--build-dir DIR] [--steps 150] [--global-batch 96]
                                 [--image-size 32] [--hidden 16] [--rounds 3]
                                 [--overlap-comparison --bucket-elements N
                                  --after-bucket-elements M]

Three fulcrum-trainer processes at emulated slowdowns 1, 2 and 4 train the small CNN
(CIFAR-sized 3x32x32 inputs by default) under each policy (optimal, proportional, equal), one
run per policy per round, the policies interleaved so that the shared machine's drift hits
them alike; then one more optimal run in which the fastest trainer becomes 2x slower mid-run.
Prints one JSON object: per policy every round's samples/s and eta and their medians,
optimal/equal per round, coordinator overhead, reaction steps. Goals (issue 5), judged on the
medians: optimal >= 1.6x equal, eta >= 0.9, overhead < 1%, reaction <= 20 steps.

With --overlap-comparison it instead runs the optimal policy with the gradient all-reduce
overlapped with backward (--overlap true) and after it (--overlap false), interleaved per
round, and prints both and their ratio (the same measure: samples/s over the last 70%). The
overlapped runs use --bucket-elements, the others --after-bucket-elements (default: the same;
the trainer's default of 1M, one bucket for these models, is what ran before overlap existed).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(build_dir, policy, steps, global_batch, image_size, change=None, hidden=16, extra=()):
    command = [sys.executable, os.path.join(ROOT, "scripts", "local-train"), "--build-dir", build_dir,
               "--policy", policy, "--steps", str(steps), "--global-batch", str(global_batch),
               "--slowdowns", "1,2,4", "--model", "cnn", "--quiet"]
    if change:
        command += ["--change", change]
    command += ["--", "--hidden", str(hidden), "--image-size", str(image_size), *extra]
    load_before = os.getloadavg()[0]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"local-train failed for policy {policy}")
    summary = json.loads(result.stdout)
    summary["load_average"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return summary


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--global-batch", type=int, default=96)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--overlap-comparison", action="store_true")
    parser.add_argument("--bucket-elements", type=int, default=1 << 20)
    parser.add_argument("--after-bucket-elements", type=int, default=None)
    args = parser.parse_args()
    if args.overlap_comparison:
        compare_overlap(args)
        return
    model = f"cnn (hidden 16, 3x{args.image_size}x{args.image_size})"
    report = {"emulated_heterogeneity": True,
              "setup": {"trainers": 3, "slowdowns": [1, 2, 4], "model": model,
                        "global_batch": args.global_batch, "steps": args.steps, "rounds": args.rounds,
                        "note": "CPU trainers on one shared machine; slowdowns are emulated sleeps"},
              "policies": {}}
    runs = {policy: [] for policy in ("optimal", "proportional", "equal")}
    overheads = []
    for _ in range(args.rounds):
        for policy in runs:
            summary = run(args.build_dir, policy, args.steps, args.global_batch, args.image_size)
            runs[policy].append(summary)
            overheads.append(summary["coordinator_overhead_fraction"])
    for policy, summaries in runs.items():
        report["policies"][policy] = {
            "samples_per_second": round(statistics.median(s["samples_per_second"] for s in summaries), 1),
            "eta": round(statistics.median(s.get("efficiency", 0.0) for s in summaries), 3),
            "rounds": [{
                "samples_per_second": round(s["samples_per_second"], 1),
                "ideal_samples_per_second": round(s["ideal_samples_per_second"], 1),
                "eta": round(s.get("efficiency", 0.0), 3),
                "plan_changes": s["plan_changes"],
                "final_batches": [t["final_local_batch"] for t in s["trainers"]],
                "parameters_identical": s["parameters_identical"],
                "machine_load_average_before_after": s["load_average"],
            } for s in summaries],
        }
    policies = report["policies"]
    ratio = lambda other: round(statistics.median(
        o["samples_per_second"] / e["samples_per_second"] for o, e in zip(runs["optimal"], runs[other])), 3)
    report["optimal_over_equal"] = ratio("equal")
    report["optimal_over_proportional"] = ratio("proportional")
    report["coordinator_overhead_fraction"] = round(max(overheads), 5)
    change_step = args.steps // 2
    reaction = run(args.build_dir, "optimal", args.steps + 60, args.global_batch, args.image_size,
                   f"{change_step}:0:2")
    report["reaction"] = {"event": "trainer-0 emulated slowdown 1 -> 2", **reaction.get("change", {})}
    report["goals"] = {
        "optimal_at_least_1.6x_equal": report["optimal_over_equal"] >= 1.6,
        "eta_optimal_at_least_0.9": policies["optimal"]["eta"] >= 0.9,
        "coordinator_overhead_below_1_percent": report["coordinator_overhead_fraction"] < 0.01,
        "reaction_within_20_steps": (report["reaction"].get("plan_reaction_steps") is not None
                                     and report["reaction"]["plan_reaction_steps"] <= 20),
    }
    print(json.dumps(report, indent=2))


def compare_overlap(args):
    model = f"cnn (hidden {args.hidden}, 3x{args.image_size}x{args.image_size})"
    runs = {"overlap": [], "after_backward": []}
    for _ in range(args.rounds):
        after_buckets = args.after_bucket_elements or args.bucket_elements
        for name, overlap, buckets in (("overlap", "true", args.bucket_elements),
                                       ("after_backward", "false", after_buckets)):
            runs[name].append(run(args.build_dir, "optimal", args.steps, args.global_batch,
                                  args.image_size, hidden=args.hidden,
                                  extra=("--overlap", overlap, "--bucket-elements", str(buckets))))
    report = {"emulated_heterogeneity": True, "benchmark": "overlap_comparison",
              "setup": {"trainers": 3, "slowdowns": [1, 2, 4], "model": model, "policy": "optimal",
                        "global_batch": args.global_batch, "steps": args.steps, "rounds": args.rounds,
                        "bucket_elements": args.bucket_elements,
                        "after_backward_bucket_elements": args.after_bucket_elements or args.bucket_elements,
                        "note": "CPU trainers and Gloo on one shared machine; slowdowns are emulated sleeps"}}
    for name, summaries in runs.items():
        report[name] = {
            "samples_per_second": round(statistics.median(s["samples_per_second"] for s in summaries), 1),
            "rounds": [round(s["samples_per_second"], 1) for s in summaries],
            "parameters_identical": all(s["parameters_identical"] for s in summaries),
        }
    report["overlap_over_after_backward"] = round(statistics.median(
        o["samples_per_second"] / a["samples_per_second"]
        for o, a in zip(runs["overlap"], runs["after_backward"])), 3)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
