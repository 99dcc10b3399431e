#!/usr/bin/env python3
"""Benchmark of the whole training system on loopback, with EMULATED heterogeneity.

  bench/trainer/trainer_bench.py [--build-dir DIR] [--steps 200] [--global-batch 96]

Three fulcrum-trainer processes at emulated slowdowns 1, 2 and 4 train the small CNN under
each policy (optimal, proportional, equal) in one invocation, then one more optimal run in
which the fastest trainer becomes 2x slower mid-run. Prints one JSON object:
samples/s and eta per policy, optimal/equal, coordinator overhead, reaction steps. Goals
(issue 5): optimal >= 1.6x equal, eta >= 0.9, overhead < 1%, reaction <= 20 steps.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(build_dir, policy, steps, global_batch, change=None):
    command = [sys.executable, os.path.join(ROOT, "scripts", "local-train"), "--build-dir", build_dir,
               "--policy", policy, "--steps", str(steps), "--global-batch", str(global_batch),
               "--slowdowns", "1,2,4", "--model", "cnn", "--quiet"]
    if change:
        command += ["--change", change]
    command += ["--", "--hidden", "16", "--image-size", "16"]
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
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--global-batch", type=int, default=96)
    args = parser.parse_args()
    report = {"emulated_heterogeneity": True,
              "setup": {"trainers": 3, "slowdowns": [1, 2, 4], "model": "cnn (hidden 16, 3x16x16)",
                        "global_batch": args.global_batch, "steps": args.steps,
                        "note": "CPU trainers on one shared machine; slowdowns are emulated sleeps"},
              "policies": {}}
    overheads = []
    for policy in ("optimal", "proportional", "equal"):
        summary = run(args.build_dir, policy, args.steps, args.global_batch)
        report["policies"][policy] = {
            "samples_per_second": round(summary["samples_per_second"], 1),
            "ideal_samples_per_second": round(summary["ideal_samples_per_second"], 1),
            "eta": round(summary.get("efficiency", 0.0), 3),
            "plan_changes": summary["plan_changes"],
            "final_batches": [t["final_local_batch"] for t in summary["trainers"]],
            "parameters_identical": summary["parameters_identical"],
            "machine_load_average_before_after": summary["load_average"],
        }
        overheads.append(summary["coordinator_overhead_fraction"])
    policies = report["policies"]
    report["optimal_over_equal"] = round(policies["optimal"]["samples_per_second"] /
                                         policies["equal"]["samples_per_second"], 3)
    report["optimal_over_proportional"] = round(policies["optimal"]["samples_per_second"] /
                                                policies["proportional"]["samples_per_second"], 3)
    report["coordinator_overhead_fraction"] = round(max(overheads), 5)
    change_step = args.steps // 2
    reaction = run(args.build_dir, "optimal", args.steps + 60, args.global_batch, f"{change_step}:0:2")
    report["reaction"] = {"event": "trainer-0 emulated slowdown 1 -> 2", **reaction.get("change", {})}
    report["goals"] = {
        "optimal_at_least_1.6x_equal": report["optimal_over_equal"] >= 1.6,
        "eta_optimal_at_least_0.9": policies["optimal"]["eta"] >= 0.9,
        "coordinator_overhead_below_1_percent": report["coordinator_overhead_fraction"] < 0.01,
        "reaction_within_20_steps": (report["reaction"].get("plan_reaction_steps") is not None
                                     and report["reaction"]["plan_reaction_steps"] <= 20),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
