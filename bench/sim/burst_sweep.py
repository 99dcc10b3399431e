#!/usr/bin/env python3
"""Bursts of contention against the balancer, in fulcrum-sim (SIMULATED).

Runs bench/scenarios/demo_burst.yaml with the A100's burst factor, its length and the seed
varied, and prints JSON: per (factor, length), how many runs planned after the burst and the
split's efficiency (against the true optimum of the mean costs) over the last 100 steps, the
median, the least and how many runs stayed under 0.9. A burst long enough to be confirmed as a
change of speed and answered must not leave the split slow once it has ended
(docs/balancer.md, "burst of contention").

    python3 bench/sim/burst_sweep.py --sim build/bench/sim/fulcrum-sim [--seeds 20]
"""

import argparse
import json
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

SCENARIO = pathlib.Path(__file__).resolve().parents[1] / "scenarios" / "demo_burst.yaml"
BURST_STEP = 100


def scenario_with(text, factor, length, seed):
    """demo_burst.yaml with the burst's factor and length and the seed replaced."""
    text = re.sub(r"^seed: \d+$", f"seed: {seed}", text, flags=re.M)
    text = re.sub(r"(\{step: %d, kind: slowdown, worker: w0, factor: )[0-9.]+\}" % BURST_STEP,
                  r"\g<1>%s}" % factor, text)
    return re.sub(r"\{step: \d+, (kind: slowdown, worker: w0, factor: 1.0\})",
                  r"{step: %d, \1" % (BURST_STEP + length), text)


def run(sim, text):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as scenario:
        scenario.write(text)
        scenario.flush()
        result = subprocess.run([sim, "--policy", "optimal", "--trace", scenario.name],
                                capture_output=True, text=True, check=True, timeout=300)
    return json.loads(result.stdout)[0]["policies"]["optimal"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim", default="build/bench/sim/fulcrum-sim")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--factors", default="1.4,1.7,2.0")
    parser.add_argument("--lengths", default="3,5")
    args = parser.parse_args()
    template = SCENARIO.read_text()
    cases = []
    for factor in args.factors.split(","):
        for length in (int(x) for x in args.lengths.split(",")):
            planned_after, ends = 0, []
            for seed in range(1, args.seeds + 1):
                result = run(args.sim, scenario_with(template, factor, length, seed))
                planned_after += any(p["step"] >= BURST_STEP for p in result["plans"])
                tail = result["efficiency_per_step"][-100:]
                ends.append(statistics.mean(tail))
            cases.append({"factor": float(factor), "length_steps": length, "seeds": args.seeds,
                          "runs_with_a_plan_after_the_burst": planned_after,
                          "efficiency_last_100_steps_median": round(statistics.median(ends), 3),
                          "efficiency_last_100_steps_min": round(min(ends), 3),
                          "runs_under_0_9": sum(e < 0.9 for e in ends)})
    json.dump({"simulated": True, "scenario": str(SCENARIO.name), "cases": cases}, sys.stdout,
              indent=1)
    print()


if __name__ == "__main__":
    main()
