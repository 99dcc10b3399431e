#!/usr/bin/env python3
"""Membership change pause: how long the survivors' training stops when one of 4 trainers is
killed (SIGKILL), hangs (SIGSTOP), or a fifth joins; Fulcrum against torchrun in the same run.

  bench/trainer/membership_bench.py [--build-dir build] [--scenarios kill,hang,join]
      [--systems fulcrum,torchrun] [--trainers 4] [--image-size 16] [--hidden 16]
      [--global-batch 96] [--warmup-steps 40] [--event-timeout 150] [--workdir DIR]
      [-- extra fulcrum-coordinator flags]

Fulcrum: one fulcrum-coordinator and N fulcrum-trainer processes on loopback (as
scripts/local-train starts them), `--model cnn`, equal speeds (no emulation). PyTorch: N
torchrun agents (Debian's python3-torch at /usr/bin/python3, `--rdzv_backend c10d`, `--nnodes
1:N+1`, one worker each) around a rendezvous store of their own, running
bench/trainer/torchrun_worker.py: the same CNN with DistributedDataParallel over gloo,
checkpointing every 10 steps, because torchelastic restarts every worker on any change.

Events, each in a fresh job after --warmup-steps steps:
  kill   SIGKILL the last trainer (torchrun: its agent and worker, i.e. the pod is gone)
  hang   SIGSTOP the last trainer (torchrun: its worker); killed after the measurement
  join   start one more trainer (torchrun: one more agent)

Measured from every survivor's per-step wall-clock log: the pause is the longest gap between
two consecutive completed steps that ends after the event ("last step before -> first step
after"; for a join, the gap the switch-over causes, however long after the newcomer's start it
comes). Reported per survivor and as the worst over survivors, with the median step time before
the event, when training resumed (seconds after the event) and, for torchrun, the steps redone
from the checkpoint. Prints one JSON object; goals (issue 13): kill <= 2 s, hang <= 2 s,
join <= 1 s for Fulcrum.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from json_lines import read_json_lines  # this folder is on sys.path: run as a script

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "lib"))
from free_port import free_port  # noqa: E402 (below the ephemeral range)
TOKEN = "membership-bench-token"
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch; pyenv's python3 has no torch
GOALS_SECONDS = {"kill": 2.0, "hang": 2.0, "join": 1.0}


def step_lines(path):
    return [line for line in read_json_lines(path) if "step" in line and "unix_time" in line]


def wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")


def measure(logs, event_time, end_time):
    """logs: {name: [step lines]} of the survivors. The longest gap between consecutive steps
    that ends after the event, per survivor; the worst over survivors is the pause."""
    survivors = {}
    for name, lines in logs.items():
        times = sorted(line["unix_time"] for line in lines if line["unix_time"] <= end_time)
        before = [t for t in times if t <= event_time]
        gaps = [(b - a, a, b) for a, b in zip(times, times[1:]) if b > event_time]
        if not before or not gaps:
            survivors[name] = {"pause_seconds": None, "note": "no step before or after the event"}
            continue
        pause, start, end = max(gaps)
        recent = before[-21:]
        step_seconds = statistics.median(b - a for a, b in zip(recent, recent[1:])) if len(recent) > 1 else None
        steps = {line["unix_time"]: line["step"] for line in lines}
        survivors[name] = {
            "pause_seconds": round(pause, 3),
            "pause_starts_after_event_seconds": round(start - event_time, 3),
            "resumed_after_event_seconds": round(end - event_time, 3),
            "step_seconds_before": round(step_seconds, 4) if step_seconds else None,
            "step_before_pause": steps.get(start),
            "step_after_pause": steps.get(end),
        }
    pauses = [s["pause_seconds"] for s in survivors.values() if s["pause_seconds"] is not None]
    return {
        "pause_seconds": max(pauses) if pauses and len(pauses) == len(survivors) else None,
        "resumed_after_event_seconds": max((s["resumed_after_event_seconds"] for s in survivors.values()
                                            if s.get("resumed_after_event_seconds") is not None), default=None),
        "survivors": survivors,
    }


class Processes:
    """Children of one scenario: killed, whole process groups, when it ends."""

    def __init__(self):
        self.children = []

    def start(self, command, log, env=None):
        process = subprocess.Popen(command, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
        self.children.append(process)
        return process

    def stop_all(self):
        for child in self.children:
            if child.poll() is None:
                try:
                    os.killpg(child.pid, signal.SIGCONT)
                    os.killpg(child.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for child in self.children:
            child.wait()


# ----------------------------------------------------------------------------------- Fulcrum
class FulcrumJob:
    def __init__(self, args, workdir, processes):
        self.args, self.workdir, self.processes = args, workdir, processes
        self.trainers = []
        with open(os.path.join(workdir, "tokens"), "w") as handle:
            handle.write(f"bench {TOKEN}\n")
        with open(os.path.join(workdir, "token"), "w") as handle:
            handle.write(TOKEN + "\n")
        log = os.path.join(workdir, "coordinator.log")
        processes.start(
            [os.path.join(args.build_dir, "operator/cmd/fulcrum_coordinator/fulcrum-coordinator"),
             "--listen", "127.0.0.1:0", "--job-token-file", os.path.join(workdir, "tokens"),
             "--global-batch", str(args.global_batch), "--min-workers", str(args.trainers),
             "--settle-ms", "300", "--insecure", "true", *args.coordinator_args], log)
        self.port = None

        def listening():
            for line in read_json_lines(log):
                if line.get("msg") == "listening":
                    self.port = line["port"]
            return self.port is not None

        wait_for(listening, 30, "the coordinator to listen (see " + log + ")")

    def add_trainer(self):
        pod = f"trainer-{len(self.trainers)}"
        samples = os.path.join(self.workdir, pod + ".samples")
        process = self.processes.start(
            [os.path.join(self.args.build_dir, "trainer_image/trainer/fulcrum-trainer"),
             "--coordinator", f"127.0.0.1:{self.port}", "--token-file", os.path.join(self.workdir, "token"),
             "--coordinator-insecure", "true", "--job", "bench", "--pod", pod, "--model", "cnn",
             "--hidden", str(self.args.hidden), "--image-size", str(self.args.image_size),
             "--steps", "0", "--metrics-port", "-1", "--sample-log", samples],
            os.path.join(self.workdir, pod + ".log"))
        self.trainers.append({"name": pod, "process": process, "log": samples, "started": time.time()})
        return self.trainers[-1]


def run_fulcrum(kind, args, workdir):
    processes = Processes()
    try:
        job = FulcrumJob(args, workdir, processes)
        for _ in range(args.trainers):
            job.add_trainer()
        wait_for(lambda: all(len(step_lines(t["log"])) >= args.warmup_steps for t in job.trainers),
                 120, f"{args.warmup_steps} steps on every trainer")
        victim = job.trainers[-1]
        survivors = job.trainers[:-1] if kind in ("kill", "hang") else list(job.trainers)
        generation = max(line["generation"] for line in step_lines(survivors[0]["log"]))
        event_time = time.time()
        newcomer = None
        if kind == "kill":
            victim["process"].send_signal(signal.SIGKILL)
        elif kind == "hang":
            victim["process"].send_signal(signal.SIGSTOP)
        else:
            newcomer = job.add_trainer()
        watched = survivors + ([newcomer] if newcomer else [])

        def recovered():
            return all(sum(1 for line in step_lines(t["log"]) if line["generation"] > generation)
                       >= args.after_steps for t in watched)

        try:
            wait_for(recovered, args.event_timeout, f"{args.after_steps} steps in a new generation")
            timed_out = False
        except RuntimeError:
            timed_out = True
        end_time = time.time()
        result = measure({t["name"]: step_lines(t["log"]) for t in survivors}, event_time, end_time)
        result["timed_out_after_seconds"] = args.event_timeout if timed_out else None
        new_generation = [line["generation"] for line in step_lines(survivors[0]["log"])
                          if line["unix_time"] > event_time]
        result["generation_before"] = generation
        result["generation_after"] = max(new_generation) if new_generation else None
        if newcomer:
            lines = step_lines(newcomer["log"])
            result["newcomer_first_step_after_start_seconds"] = (
                round(min(line["unix_time"] for line in lines) - newcomer["started"], 3) if lines else None)
        return result
    finally:
        processes.stop_all()


# ---------------------------------------------------------------------------------- torchrun
class TorchrunJob:
    def __init__(self, args, workdir, processes):
        self.args, self.workdir, self.processes = args, workdir, processes
        self.agents = []
        self.port = free_port()
        self.checkpoints = os.path.join(workdir, "checkpoints")
        os.makedirs(self.checkpoints, exist_ok=True)
        # The rendezvous store in a process of its own, as Fulcrum's coordinator is: killing an
        # agent must not take the store with it (the first agent would host it otherwise).
        processes.start([TORCH_PYTHON, "-c",
                         "import datetime, sys, time, torch.distributed as d\n"
                         f"s = d.TCPStore('127.0.0.1', {self.port}, is_master=True, "
                         "timeout=datetime.timedelta(seconds=3600), wait_for_workers=False)\n"
                         "print('store up', flush=True)\n"
                         "time.sleep(1e9)\n"], os.path.join(workdir, "store.log"))
        wait_for(lambda: "store up" in open(os.path.join(workdir, "store.log")).read(), 60,
                 "the rendezvous store")

    def add_agent(self):
        name = f"node-{len(self.agents)}"
        log = os.path.join(self.workdir, name + ".steps")
        env = dict(os.environ, OMP_NUM_THREADS="1")
        process = self.processes.start(
            [TORCH_PYTHON, "-m", "torch.distributed.run", f"--nnodes=1:{self.args.trainers + 1}",
             "--nproc_per_node=1", "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{self.port}",
             "--rdzv_id=membership-bench", "--rdzv_conf=is_host=false", "--max_restarts=100",
             # Not the defaults (0): torch 1.13 under Python 3.11 cannot parse "0" (Std is an
             # IntFlag whose iteration skips NONE), so stdout goes to files, stderr is teed.
             "--redirects=1", "--tee=2", "--log_dir=" + os.path.join(self.workdir, name + "-logs"),
             os.path.join(ROOT, "bench/trainer/torchrun_worker.py"), "--log", log,
             "--checkpoint-dir", self.checkpoints, "--global-batch", str(self.args.global_batch),
             "--image-size", str(self.args.image_size), "--hidden", str(self.args.hidden)],
            os.path.join(self.workdir, name + ".log"), env=env)
        self.agents.append({"name": name, "process": process, "log": log, "started": time.time()})
        return self.agents[-1]


def run_torchrun(kind, args, workdir):
    processes = Processes()
    try:
        job = TorchrunJob(args, workdir, processes)
        for _ in range(args.trainers):
            job.add_agent()
        full = lambda t: [l for l in step_lines(t["log"]) if l["world"] == args.trainers]
        wait_for(lambda: all(len(full(t)) >= args.warmup_steps for t in job.agents), 300,
                 f"{args.warmup_steps} steps of the {args.trainers}-worker group")
        victim = job.agents[-1]
        survivors = job.agents[:-1] if kind in ("kill", "hang") else list(job.agents)
        # A restart for a membership change keeps TORCHELASTIC_RESTART_COUNT (only failures
        # count), so a restarted worker is told apart by its process id.
        pids = {t["name"]: step_lines(t["log"])[-1]["pid"] for t in survivors}
        event_time = time.time()
        newcomer = None
        if kind == "kill":
            os.killpg(victim["process"].pid, signal.SIGKILL)  # the agent and its worker: the pod is gone
        elif kind == "hang":
            os.kill(step_lines(victim["log"])[-1]["pid"], signal.SIGSTOP)  # the worker hangs
        else:
            newcomer = job.add_agent()
        watched = survivors + ([newcomer] if newcomer else [])

        def recovered():
            return all(sum(1 for line in step_lines(t["log"])
                           if line["unix_time"] > event_time and line["pid"] != pids.get(t["name"]))
                       >= args.after_steps for t in watched)

        try:
            wait_for(recovered, args.event_timeout, f"{args.after_steps} steps after the restart")
            timed_out = False
        except RuntimeError:
            timed_out = True
        end_time = time.time()
        result = measure({t["name"]: step_lines(t["log"]) for t in survivors}, event_time, end_time)
        result["timed_out_after_seconds"] = args.event_timeout if timed_out else None
        lines = step_lines(survivors[0]["log"])
        before = [l["step"] for l in lines if l["unix_time"] <= event_time]
        after = [l for l in lines if l["unix_time"] > event_time and l["pid"] != pids[survivors[0]["name"]]]
        if before and after:
            # Steps the survivors trained before the event and trained again after the restart.
            result["steps_redone_from_checkpoint"] = max(0, before[-1] + 1 - after[0]["step"])
        result["survivor_workers_restarted"] = all(
            any(l["pid"] != pids[t["name"]] for l in step_lines(t["log"]) if l["unix_time"] > event_time)
            for t in survivors)
        return result
    finally:
        processes.stop_all()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    parser.add_argument("--scenarios", default="kill,hang,join")
    parser.add_argument("--systems", default="fulcrum,torchrun")
    parser.add_argument("--trainers", type=int, default=4)
    parser.add_argument("--image-size", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--global-batch", type=int, default=96)
    parser.add_argument("--warmup-steps", type=int, default=40)
    parser.add_argument("--after-steps", type=int, default=20)
    parser.add_argument("--event-timeout", type=float, default=150.0)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("coordinator_args", nargs="*", help="after --: extra fulcrum-coordinator flags")
    args = parser.parse_args()
    scenarios = [s for s in args.scenarios.split(",") if s]
    systems = [s for s in args.systems.split(",") if s]
    if any(s not in GOALS_SECONDS for s in scenarios) or any(s not in ("fulcrum", "torchrun") for s in systems):
        parser.error("--scenarios: kill, hang, join; --systems: fulcrum, torchrun")
    workdir = args.workdir or tempfile.mkdtemp(prefix="fulcrum-membership-bench-")
    report = {
        "benchmark": "membership change pause (issue 13, item 3)",
        "model": f"cnn (hidden {args.hidden}, 3x{args.image_size}x{args.image_size}), global batch "
                 f"{args.global_batch}, equal speeds (no emulation)",
        "trainers": args.trainers,
        "load_average_at_start": os.getloadavg(),
        "cpus": os.cpu_count(),
        "coordinator_args": args.coordinator_args,
        "goals_seconds": {k: GOALS_SECONDS[k] for k in scenarios},
        "workdir": workdir,
        "results": {},
    }
    for scenario in scenarios:
        report["results"][scenario] = {}
        for system in systems:
            directory = os.path.join(workdir, f"{system}-{scenario}")
            os.makedirs(directory, exist_ok=True)
            print(f"membership-bench: {system} {scenario} ...", file=sys.stderr, flush=True)
            runner = run_fulcrum if system == "fulcrum" else run_torchrun
            result = runner(scenario, args, directory)
            result["load_average_after"] = os.getloadavg()
            report["results"][scenario][system] = result
            print(f"membership-bench: {system} {scenario}: pause {result['pause_seconds']} s",
                  file=sys.stderr, flush=True)
        fulcrum = report["results"][scenario].get("fulcrum")
        if fulcrum:
            pause = fulcrum["pause_seconds"]
            fulcrum["goal_met"] = pause is not None and pause <= GOALS_SECONDS[scenario]
            torchrun = report["results"][scenario].get("torchrun")
            if torchrun and pause and torchrun["pause_seconds"]:
                report["results"][scenario]["torchrun_over_fulcrum"] = round(torchrun["pause_seconds"] / pause, 1)
    report["load_average_at_end"] = os.getloadavg()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
