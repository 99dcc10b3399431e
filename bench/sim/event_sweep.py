#!/usr/bin/env python3
"""Issue 25's per-event goals over many seeds, in fulcrum-sim (SIMULATED).

One seed's reaction is one draw of the timing noise: a single run of slowdown6x answered in 11
steps on one balancer and 10 on another that did worse on most seeds. This runs each scenario
with seeds 1..N (and optional balancer settings, to compare two in one binary) and prints JSON:
per event, the reaction (steps until the split's efficiency under the mean costs is >= 0.95
for good) as median, 90th percentile, worst and how many runs never got there; how many runs
needed more than 2 plans; how many raised the slowed worker's batch; the efficiency the split
settled at (the last 100 steps before the next event); and the run's efficiency.

    python3 bench/sim/event_sweep.py [--sim build/bench/sim/fulcrum-sim] [--seeds 30]
        [--set slowdown_evidence_to_plan=4] [SCENARIO.yaml ...]
"""

import argparse
import json
import math
import pathlib
import statistics
import sys

import yaml

from burst_sweep import run  # one scenario text through fulcrum-sim, its optimal policy's run

SCENARIOS = pathlib.Path(__file__).resolve().parents[1] / "scenarios"
DEFAULT_SCENARIOS = ["slowdown.yaml", "slowdown6x.yaml", "demo_noise.yaml", "churn.yaml"]


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)]


def settled_efficiency(run, index):
    """The split's mean efficiency under the mean costs (as the reaction's) over the last 100
    steps before the next event (or the end): where the split settled after event `index`,
    whether or not it ever reached 0.95."""
    events = run["events"]
    per_step = run["split_efficiency_per_step"]
    end = events[index + 1]["step"] if index + 1 < len(events) else len(per_step)
    tail = per_step[max(events[index]["step"], end - 100):end]
    return statistics.mean(tail)


def summarise(runs):
    """Per event index, the reaction and plan statistics over the runs of one scenario."""
    events = []
    for index, first in enumerate(runs[0]["events"]):
        per_run = [run["events"][index] for run in runs]
        settled = [settled_efficiency(run, index) for run in runs]
        reached = [e["reaction_steps"] for e in per_run if e["reaction_steps"] is not None]
        events.append({
            "step": first["step"],
            "event": first["event"],
            "reaction_median": statistics.median(reached) if reached else None,
            "reaction_p90": percentile(reached, 0.9) if reached else None,
            "reaction_worst": max(reached) if reached else None,
            "runs_never_reaching_0_95": len(per_run) - len(reached),
            "runs_over_10_steps": sum(r > 10 for r in reached),
            "runs_with_more_than_2_plans": sum(e["plan_changes"] > 2 for e in per_run),
            "runs_with_a_rise": sum(e["slowed_batch_rises"] > 0 for e in per_run),
            "settled_efficiency_median": round(statistics.median(settled), 4),
            "settled_efficiency_min": round(min(settled), 4),
            "runs_settled_under_0_8": sum(e < 0.8 for e in settled),
        })
    efficiencies = [run["efficiency"] for run in runs]
    return {
        "efficiency_median": round(statistics.median(efficiencies), 4),
        "efficiency_min": round(min(efficiencies), 4),
        "events": events,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim", default="build/bench/sim/fulcrum-sim")
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a balancer setting for every scenario, "
                             "e.g. slowdown_evidence_to_plan=4")
    parser.add_argument("scenarios", nargs="*")
    args = parser.parse_args()
    settings = {}
    for item in args.set:
        key, _, value = item.partition("=")
        settings[key] = yaml.safe_load(value)
    paths = [pathlib.Path(p) for p in args.scenarios] or [SCENARIOS / s for s in DEFAULT_SCENARIOS]
    results = []
    for path in paths:
        template = yaml.safe_load(path.read_text())
        runs = []
        for seed in range(1, args.seeds + 1):
            scenario = dict(template, seed=seed)
            scenario["balancer"] = dict(template.get("balancer", {}), **settings)
            runs.append(run(args.sim, yaml.safe_dump(scenario)))
        results.append(dict({"scenario": template["name"], "seeds": args.seeds},
                            **summarise(runs)))
    json.dump({"simulated": True, "balancer_settings": settings, "results": results},
              sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
