#!/usr/bin/python3
"""The operator at cluster scale: fulcrum-operator on a real control plane with kwok GPU nodes,
many HeteroTrainingJobs, and emulated trainers (fulcrum-operator-load-trainers) playing every
trainer pod against the operator's coordinator. Prints one JSON document (docs/benchmarks.md).

  bench/operator/operator_scale_bench.py [--nodes 500] [--jobs 200] [--workers-per-job 8]
      [--baseline-seconds 60] [--window-seconds 120] [--build-dir build] [--keep]

1. tests/cluster/up with --nodes kwok nodes, a quarter each of H100, A100, V100 and T4 (4 GPUs
   each, GPU Feature Discovery labels), and an API server audit log of the operator's requests
   only (its ServiceAccount; apiserver_request_total has no user-agent or user label);
2. the chart's CRD, ServiceAccount and RBAC (helm, replicaCount=0), and fulcrum-operator run
   from the build as that ServiceAccount, with leader election and TLS as deployed;
3. baseline: the same operator idle on the same cluster, no jobs, for --baseline-seconds;
4. --jobs jobs of --workers-per-job workers applied at once; once every pod is Running (kwok),
   the emulated trainers start, each under its pod's name with its job's token and CA;
5. time from the apply until every job is Running and balanced (below), then after --settle-
   seconds a steady-state window of --window-seconds: the operator's RSS, CPU (total, and by
   thread: the coordinator's gRPC threads against the controller's), its API requests by verb
   (audit log), and status writes per job per minute;
6. everything torn down (tests/cluster/down), also on failure or Ctrl-C.

A job is "Running and balanced" when its status says phase Running with readyWorkers equal to
its workers, condition Running True, condition Rebalancing False (no announced plan waiting to
apply) and a lastRebalance (the coordinator has handed the job a plan).
"""
import argparse
import base64
import collections
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "lib"))
from free_port import free_port  # noqa: E402 (below the ephemeral range)
OPERATOR_USER = "system:serviceaccount:fulcrum-system:fulcrum"
MANAGED = "app.kubernetes.io/managed-by=fulcrum-operator"
# The four products, labelled as GPU Feature Discovery labels them; the emulated trainers give
# each the per-sample cost of the balancer's catalog speed for it.
PRODUCTS = [("h100", "NVIDIA-H100-80GB-HBM3", 81920), ("a100", "NVIDIA-A100-SXM4-80GB", 81920),
            ("v100", "Tesla-V100-SXM2-16GB", 16384), ("t4", "Tesla-T4", 15360)]
# The coordinator's threads: gRPC's own (its callback-API poller "nexting_thread", EventEngine,
# executor and timer threads, by the names gRPC gives them) and the coordinator's ticker
# ("coord-ticker"). Every other thread is the controller's (informers, work queue, reconcilers,
# leader election, events, HTTP endpoints, main), which are unnamed ("fulcrum-operato").
COORDINATOR_THREAD = re.compile(r"^(nexting_thread|coord-ticker|grpc|event_engine|default-executo|"
                                r"resolver-execut|timer_manager|global-executo|executor)")


def say(message):
    print(f"[operator-scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Bench:
    def __init__(self, args):
        self.args = args
        self.build_dir = os.path.abspath(args.build_dir)
        self.dir = tempfile.mkdtemp(prefix="fulcrum-operator-scale-")
        self.cluster_dir = os.path.join(self.dir, "cluster")
        self.processes = []
        self.trainer_waves = []  # (process, its JSON-lines output), one per batch of jobs started
        self.node_gpus = {}  # node -> (GPU product, memory MiB), read once
        self.cluster_up = False
        self.audit_offset = 0
        self.audit_requests = {}  # auditID -> request (first event seen)

    # --- cluster ----------------------------------------------------------------------
    def kubectl(self, *arguments, kubeconfig=None, stdin=None):
        out = subprocess.run([self.kubectl_bin, "--kubeconfig", kubeconfig or self.kubeconfig,
                              *arguments], input=stdin, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(arguments[:3])} failed: {out.stderr[-2000:]}")
        return out.stdout

    def write_inventory(self):
        per_product = [self.args.nodes // 4 + (1 if i < self.args.nodes % 4 else 0) for i in range(4)]
        lines = ["nodes:"]
        for (prefix, product, memory), count in zip(PRODUCTS, per_product):
            if count:
                lines += [f"  - namePrefix: {prefix}", f"    count: {count}",
                          f"    gpu: {{product: {product}, memoryMiB: {memory}, "
                          f"count: {self.args.gpus_per_node}}}"]
        path = os.path.join(self.dir, "nodes.yaml")
        with open(path, "w") as handle:
            handle.write("\n".join(lines) + "\n")
        return path

    def write_audit_policy(self):
        path = os.path.join(self.dir, "audit-policy.yaml")
        with open(path, "w") as handle:
            handle.write(f"""apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users: ["{OPERATOR_USER}"]
  - level: None
""")
        return path

    def start_cluster(self):
        self.audit_log = os.path.join(self.dir, "audit.log")
        say(f"starting the control plane with {self.args.nodes} kwok GPU nodes")
        out = subprocess.run([os.path.join(ROOT, "tests", "cluster", "up"), "--dir", self.cluster_dir,
                              "--nodes", self.write_inventory(),
                              "--apiserver-arg", f"--audit-policy-file={self.write_audit_policy()}",
                              "--apiserver-arg", f"--audit-log-path={self.audit_log}",
                              "--apiserver-arg", "--audit-log-maxsize=0"],
                             capture_output=True, text=True)
        self.cluster_up = True
        if out.returncode != 0:
            raise RuntimeError(f"tests/cluster/up failed:\n{out.stderr[-3000:]}")
        env = {}
        with open(os.path.join(self.cluster_dir, "cluster.env")) as handle:
            for line in handle:
                key, _, value = line.strip().partition("=")
                env[key] = value
        self.kubeconfig = env["KUBECONFIG"]
        self.kubectl_bin = env["FULCRUM_KUBECTL"]
        self.helm_bin = env["FULCRUM_HELM"]

    def install_chart(self):
        say("helm install fulcrum helm/fulcrum (CRD, ServiceAccount, RBAC; the operator runs here)")
        out = subprocess.run([self.helm_bin, "--kubeconfig", self.kubeconfig, "install", "fulcrum",
                              os.path.join(ROOT, "helm", "fulcrum"), "--namespace", "fulcrum-system",
                              "--create-namespace", "--set", "replicaCount=0", "--wait"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"helm install failed:\n{out.stderr[-3000:]}")
        self.kubectl("wait", "--for", "condition=established", "--timeout=60s",
                     "crd/heterotrainingjobs.fulcrum.dev")
        token = self.kubectl("-n", "fulcrum-system", "create", "token", "fulcrum",
                             "--duration=24h").strip()
        self.operator_kubeconfig = os.path.join(self.dir, "operator.kubeconfig")
        shutil.copyfile(self.kubeconfig, self.operator_kubeconfig)
        self.kubectl("config", "set-credentials", "fulcrum-operator", f"--token={token}",
                     kubeconfig=self.operator_kubeconfig)
        self.kubectl("config", "set-context", "--current", "--user=fulcrum-operator",
                     kubeconfig=self.operator_kubeconfig)

    def spawn(self, name, command, stdout=None):
        log = open(os.path.join(self.dir, f"{name}.log"), "w")
        process = subprocess.Popen(command, stdout=stdout or log, stderr=log,
                                   start_new_session=True)
        self.processes.append((name, process))
        return process

    def start_operator(self):
        self.coordinator = f"127.0.0.1:{free_port()}"
        self.health = f"127.0.0.1:{free_port()}"
        self.metrics = f"127.0.0.1:{free_port()}"
        binary = os.path.join(self.build_dir, "operator", "cmd", "fulcrum_operator", "fulcrum-operator")
        command = [binary, "--kubeconfig", self.operator_kubeconfig,
                   "--leader-elect-lease-name", "fulcrum",  # the chart's Lease
                   "--coordinator-listen", self.coordinator, "--coordinator-address", self.coordinator,
                   "--coordinator-tls-secret", "fulcrum-system/fulcrum-coordinator-tls",
                   "--health-listen", self.health, "--metrics-listen", self.metrics]
        if self.args.status_min_interval:
            command += ["--status-min-interval", self.args.status_min_interval]
        command += self.args.operator_arg
        say(f"starting fulcrum-operator (coordinator {self.coordinator})")
        self.operator = self.spawn("operator", command)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.operator.poll() is not None:
                raise RuntimeError(f"fulcrum-operator exited ({self.operator.returncode}); "
                                   f"see {self.dir}/operator.log")
            if "fulcrum_operator_leader 1" in self.scrape(self.metrics):
                return
            time.sleep(0.5)
        raise RuntimeError("fulcrum-operator did not lead within 120 s")

    @staticmethod
    def scrape(address):
        try:
            with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as response:
                return response.read().decode()
        except OSError:
            return ""

    # --- measurements -------------------------------------------------------------------
    def threads(self):
        """CPU seconds by thread name, and the process's own total (dead threads included)."""
        pid = self.operator.pid
        ticks = os.sysconf("SC_CLK_TCK")
        by_name = collections.Counter()
        count = collections.Counter()
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/stat") as handle:
                    stat = handle.read()
            except OSError:
                continue  # ended meanwhile
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()
            by_name[name] += (int(fields[11]) + int(fields[12])) / ticks
            count[name] += 1
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
        fields = stat[stat.rindex(")") + 2:].split()
        total = (int(fields[11]) + int(fields[12])) / ticks
        rss_kib = 0
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    rss_kib = int(line.split()[1])
        return {"time": time.time(), "cpu_total": total, "by_name": by_name, "count": count,
                "rss_mib": rss_kib / 1024}

    def read_audit(self):
        """Every operator request in the audit log so far, once each (by auditID)."""
        with open(self.audit_log) as handle:
            handle.seek(self.audit_offset)
            data = handle.read()
        complete = data.rfind("\n") + 1
        self.audit_offset += len(data[:complete].encode())
        for line in data[:complete].splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("auditID") in self.audit_requests:
                continue
            ref = event.get("objectRef") or {}
            received = event.get("requestReceivedTimestamp", "")
            self.audit_requests[event["auditID"]] = {
                "at": datetime.datetime.fromisoformat(received.replace("Z", "+00:00")).timestamp(),
                "verb": event.get("verb", ""), "resource": ref.get("resource", ""),
                "subresource": ref.get("subresource", ""), "name": ref.get("name", ""),
                "user_agent": event.get("userAgent", ""),
                "code": (event.get("responseStatus") or {}).get("code", 0)}

    def requests_between(self, start, end):
        self.read_audit()
        return [r for r in self.audit_requests.values() if start <= r["at"] < end]

    def apiserver_requests_by_verb(self):
        """apiserver_request_total summed by verb, every client (for context)."""
        totals = collections.Counter()
        for line in self.kubectl("get", "--raw", "/metrics").splitlines():
            if line.startswith("apiserver_request_total{"):
                labels, value = line.rsplit(" ", 1)
                verb = re.search(r'verb="([^"]*)"', labels).group(1)
                totals[verb] += float(value)
        return totals

    def reconciles(self):
        """The operator's reconciles so far: how many, and their wall seconds in all."""
        found = {"count": 0.0, "sum": 0.0}
        for line in self.scrape(self.metrics).splitlines():
            for field in found:
                if line.startswith(f"fulcrum_operator_reconcile_duration_seconds_{field} "):
                    found[field] = float(line.rsplit(" ", 1)[1])
        return found

    def window(self, seconds, label):
        say(f"{label}: measuring for {seconds} s")
        before = self.threads()
        api_before = self.apiserver_requests_by_verb()
        load_before = os.getloadavg()
        trainers_before = self.trainer_counters()
        reconciles_before = self.reconciles()
        time.sleep(seconds)
        reconciles_after = self.reconciles()
        after = self.threads()
        api_after = self.apiserver_requests_by_verb()
        trainers_after = self.trainer_counters()
        elapsed = after["time"] - before["time"]
        requests = self.requests_between(before["time"], after["time"])
        by_verb = collections.Counter(r["verb"] for r in requests)
        by_kind = collections.Counter(
            f"{r['verb']} {r['resource']}{'/' + r['subresource'] if r['subresource'] else ''}"
            for r in requests)
        status_writes = collections.Counter(
            r["name"] for r in requests if r["resource"] == "heterotrainingjobs"
            and r["subresource"] == "status" and r["verb"] in ("patch", "update"))
        cpu = {name: after["by_name"][name] - before["by_name"].get(name, 0.0)
               for name in after["by_name"]}
        coordinator = sum(v for name, v in cpu.items() if COORDINATOR_THREAD.match(name))
        total = after["cpu_total"] - before["cpu_total"]
        minutes = elapsed / 60
        result = {
            "seconds": round(elapsed, 1),
            "load_average_1m": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
            "rss_mib": round(after["rss_mib"], 1),
            "threads": dict(after["count"]),
            "cpu_seconds": round(total, 2),
            "cpu_cores": round(total / elapsed, 4),
            "cpu_seconds_by_thread_name": {k: round(v, 2) for k, v in sorted(cpu.items())},
            # Threads that ended in the window are in the total, not in any name: counted as the
            # coordinator's (gRPC starts and ends threads; the controller's live as long as it).
            "coordinator_cpu_cores": round((total - (sum(cpu.values()) - coordinator)) / elapsed, 4),
            "controller_cpu_cores": round((sum(cpu.values()) - coordinator) / elapsed, 4),
            "reconciles_per_minute": round(
                (reconciles_after["count"] - reconciles_before["count"]) / minutes, 1),
            "reconcile_mean_wall_ms": round(
                1000 * (reconciles_after["sum"] - reconciles_before["sum"])
                / max(1.0, reconciles_after["count"] - reconciles_before["count"]), 2),
            "api_requests": len(requests),
            "api_requests_per_minute_by_verb": {k: round(v / minutes, 1) for k, v in sorted(by_verb.items())},
            "api_requests_by_verb_and_resource": dict(sorted(by_kind.items())),
            "api_user_agents": sorted({r["user_agent"] for r in requests}),
            "apiserver_request_total_all_clients_by_verb": {
                k: api_after[k] - api_before.get(k, 0) for k in sorted(api_after)
                if api_after[k] - api_before.get(k, 0) > 0},
        }
        if self.args.jobs and label == "steady state":
            per_job = [status_writes.get(f"job-{i}", 0) / minutes for i in range(self.args.jobs)]
            result["status_writes_per_job_per_minute"] = {
                "mean": round(sum(per_job) / len(per_job), 2), "max": round(max(per_job), 2),
                "min": round(min(per_job), 2)}
        if trainers_before and trainers_after:
            result["trainers"] = {
                key: trainers_after[key] - trainers_before[key]
                for key in ("reports", "heartbeats", "steps", "assignments", "rejoins",
                            "broken_streams", "dropped_messages", "hellos")}
            result["trainers"]["steps_per_job_per_second"] = round(
                result["trainers"]["steps"] / elapsed / self.args.jobs, 3)
            result["trainers"]["generator_cpu_cores"] = round(
                (trainers_after["cpu_seconds"] - trainers_before["cpu_seconds"]) / elapsed, 3)
        return result

    # --- jobs ---------------------------------------------------------------------------
    def apply_jobs(self):
        w = self.args.workers_per_job
        items = [{"apiVersion": "fulcrum.dev/v1alpha1", "kind": "HeteroTrainingJob",
                  "metadata": {"name": f"job-{i}", "namespace": "default"},
                  "spec": {"globalBatchSize": 64 * w, "replicas": {"min": w, "max": w},
                           "gpusPerWorker": 1, "balancing": {"policy": "optimal"},
                           "training": {"steps": 100000000}}}
                 for i in range(self.args.jobs)]
        self.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                          "items": items}))

    def running_pods(self):
        pods = json.loads(self.kubectl("get", "pods", "-n", "default", "-l", MANAGED, "-o", "json"))
        return [p for p in pods["items"]
                if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")]

    def start_trainers_as_pods_run(self, deadline):
        """Starts the emulated trainers and returns when every trainer pod is Running.

        per-job (the default): a job's trainers start once all its pods are Running, as a
        kubelet starts each pod's trainer when it is bound, so their Hellos and first plans
        overlap the other jobs' starts. Each batch of jobs that became ready since the last look
        gets its own fulcrum-operator-load-trainers process (a wave). after-all-pods: one wave
        once every pod runs, as before 2026-11-26 (the trainers' start then adds to the time).
        """
        expected = self.args.jobs * self.args.workers_per_job
        started = set()
        while time.time() < deadline:
            running = self.running_pods()
            by_job = collections.defaultdict(list)
            for pod in running:
                by_job[pod["metadata"]["labels"]["fulcrum.dev/job"]].append(pod)
            all_running = len(running) >= expected
            ready = [job for job, pods in by_job.items()
                     if job not in started and len(pods) >= self.args.workers_per_job]
            if ready and (self.args.start_trainers == "per-job" or all_running):
                self.start_trainers([pod for job in sorted(ready) for pod in by_job[job]])
                started.update(ready)
            if all_running:
                return time.time()
            say(f"{len(running)} of {expected} trainer pods Running; trainers of "
                f"{len(started)} of {self.args.jobs} jobs started")
            time.sleep(2)
        raise RuntimeError(f"not every trainer pod ran within {self.args.timeout} s")

    def start_trainers(self, pods):
        secrets = json.loads(self.kubectl("get", "secrets", "-n", "default", "-l", MANAGED, "-o", "json"))
        tokens, ca = {}, ""
        for secret in secrets["items"]:
            job = secret["metadata"]["labels"].get("fulcrum.dev/job", "")
            tokens[job] = base64.b64decode(secret["data"]["token"]).decode()
            ca = base64.b64decode(secret["data"].get("ca.crt", "")).decode() or ca
        if not self.node_gpus:
            nodes = json.loads(self.kubectl("get", "nodes", "-o", "json"))
            self.node_gpus = {
                n["metadata"]["name"]: (n["metadata"]["labels"].get("nvidia.com/gpu.product", ""),
                                        int(n["metadata"]["labels"].get("nvidia.com/gpu.memory", "16384")))
                for n in nodes["items"]}
        ca_file = os.path.join(self.dir, "coordinator-ca.crt")
        with open(ca_file, "w") as handle:
            handle.write(ca)
        jobs = collections.defaultdict(list)
        for pod in pods:
            job = pod["metadata"]["labels"]["fulcrum.dev/job"]
            product, memory = self.node_gpus[pod["spec"]["nodeName"]]
            jobs[job].append({"pod": pod["metadata"]["name"], "node": pod["spec"]["nodeName"],
                              "product": product, "memory_mib": memory})
        missing = [job for job in jobs if job not in tokens]
        if missing:
            raise RuntimeError(f"no token Secret for {missing[:5]}")
        plan = {"address": self.coordinator, "ca_file": ca_file if ca else "",
                "jobs": [{"name": f"default/{job}", "token": tokens[job], "trainers": trainers}
                         for job, trainers in sorted(jobs.items())]}
        wave = len(self.trainer_waves)
        plan_file = os.path.join(self.dir, f"trainers-{wave}.json")
        with open(plan_file, "w") as handle:
            json.dump(plan, handle)
        output = os.path.join(self.dir, f"trainers-{wave}.jsonl")
        say(f"starting {len(pods)} emulated trainers of {len(jobs)} jobs (wave {wave})")
        # One driver thread per 50 jobs: a wave's threads wake every 2 ms whether or not it is due.
        threads = max(1, min(4, len(jobs) // 50))
        process = self.spawn(
            f"trainers-{wave}",
            [os.path.join(self.build_dir, "bench", "operator", "fulcrum-operator-load-trainers"),
             "--jobs", plan_file, "--steps-per-second", str(self.args.steps_per_second),
             "--report-seconds", "1", "--threads", str(threads)],
            stdout=open(output, "w"))
        self.trainer_waves.append((process, output))

    def trainer_counters(self):
        """The counters of every wave's last line, summed (CPU seconds too)."""
        total = None
        for _, path in self.trainer_waves:
            if not os.path.exists(path):
                return None
            with open(path) as handle:
                lines = [line for line in handle.read().splitlines() if line.startswith("{")]
            if not lines:
                return None
            counters = json.loads(lines[-1])
            if total is None:
                total = counters
            else:
                for key, value in counters.items():
                    total[key] = max(total[key], value) if key == "seconds" else total[key] + value
        return total

    def job_statuses(self):
        return json.loads(self.kubectl("get", "htj", "-n", "default", "-o", "json"))["items"]

    def balanced(self, job):
        status = job.get("status", {})
        conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
        return (status.get("phase") == "Running"
                and status.get("readyWorkers") == self.args.workers_per_job
                and conditions.get("Running") == "True" and conditions.get("Rebalancing") == "False"
                and "lastRebalance" in status)

    def wait_until_balanced(self, deadline):
        while time.time() < deadline:
            for wave, (process, _) in enumerate(self.trainer_waves):
                if process.poll() is not None:
                    raise RuntimeError(f"emulated trainers exited; see {self.dir}/trainers-{wave}.log")
            jobs = self.job_statuses()
            done = sum(1 for job in jobs if self.balanced(job))
            if done == self.args.jobs:
                return time.time()
            phases = collections.Counter(job.get("status", {}).get("phase", "-") for job in jobs)
            say(f"{done} of {self.args.jobs} jobs Running and balanced; phases {dict(phases)}")
            time.sleep(2)
        raise RuntimeError(f"not every job was Running and balanced within {self.args.timeout} s")

    # --- the run ------------------------------------------------------------------------
    def run(self):
        self.start_cluster()
        self.install_chart()
        self.start_operator()
        time.sleep(self.args.settle_seconds)  # the informers' initial lists are behind us
        baseline = self.window(self.args.baseline_seconds, "baseline (idle, no jobs)")
        say(f"applying {self.args.jobs} HeteroTrainingJobs of {self.args.workers_per_job} workers")
        applied = time.time()
        deadline = applied + self.args.timeout
        self.apply_jobs()
        pods_running = self.start_trainers_as_pods_run(deadline)
        balanced = self.wait_until_balanced(deadline)
        say(f"every job Running and balanced {balanced - applied:.1f} s after the apply")
        time.sleep(self.args.settle_seconds)
        steady = self.window(self.args.window_seconds, "steady state")
        jobs = self.job_statuses()
        still_balanced = sum(1 for job in jobs if self.balanced(job))
        efficiency = sorted(job.get("status", {}).get("throughput", {}).get("efficiency", 0.0)
                            for job in jobs)
        rebalance_reasons = collections.Counter(
            job.get("status", {}).get("lastRebalance", {}).get("reason", "").split(":")[0][:40]
            for job in jobs)
        operator_metrics = self.scrape(self.metrics)
        return self.report(baseline, steady, applied, pods_running, balanced, still_balanced,
                           efficiency, rebalance_reasons, operator_metrics)

    def report(self, baseline, steady, applied, pods_running, balanced, still_balanced,
               efficiency, rebalance_reasons, operator_metrics):
        seconds_to_balanced = balanced - applied
        writes = steady.get("status_writes_per_job_per_minute", {"max": 0.0, "mean": 0.0})
        goals = [
            {"goal": "every job Running and balanced within 60 s of the apply",
             "measured_seconds": round(seconds_to_balanced, 1), "met": seconds_to_balanced <= 60},
            {"goal": "operator RSS under 100 MB in steady state",
             "measured_mib": steady["rss_mib"], "met": steady["rss_mib"] * 1.048576 < 100},
            {"goal": "at most one status write per job per 5 s (12 per minute)",
             "measured_max_per_minute": writes["max"], "measured_mean_per_minute": writes["mean"],
             "met": writes["max"] <= 12},
            {"goal": "steady-state CPU under 10% of one core excluding the coordinator",
             "measured_cores": steady["controller_cpu_cores"],
             "met": steady["controller_cpu_cores"] < 0.10},
        ]
        reconcile = {}
        for line in operator_metrics.splitlines():
            if line.startswith(("fulcrum_operator_reconcile_duration_seconds_sum",
                                "fulcrum_operator_reconcile_duration_seconds_count",
                                "fulcrum_operator_reconcile_errors_total",
                                "fulcrum_operator_rebalances_total{")) and " " in line:
                key, value = line.rsplit(" ", 1)
                if key.startswith("fulcrum_operator_rebalances_total"):
                    reason = re.search(r'reason="([^"]*)"', key).group(1)
                    reconcile[f"rebalances_{reason}"] = reconcile.get(f"rebalances_{reason}", 0) + float(value)
                else:
                    reconcile[key] = float(value)
        return {
            "benchmark": "operator_scale",
            "emulated_trainers": True,
            "setup": {"nodes": self.args.nodes, "gpus_per_node": self.args.gpus_per_node,
                      "products": [p[1] for p in PRODUCTS], "jobs": self.args.jobs,
                      "workers_per_job": self.args.workers_per_job,
                      "steps_per_second_per_job": self.args.steps_per_second,
                      "status_min_interval": self.args.status_min_interval or "the operator's default (5s)",
                      "operator_args": self.args.operator_arg,
                      "start_trainers": self.args.start_trainers,
                      "trainer_processes": len(self.trainer_waves),
                      "tls": True, "leader_election": True,
                      "baseline_seconds": self.args.baseline_seconds,
                      "window_seconds": self.args.window_seconds,
                      "settle_seconds": self.args.settle_seconds,
                      "cpus": os.cpu_count(),
                      "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                      "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                               capture_output=True, text=True).stdout.strip()},
            "seconds_until_pods_running": round(pods_running - applied, 1),
            "seconds_until_every_job_running_and_balanced": round(seconds_to_balanced, 1),
            "jobs_balanced_after_window": still_balanced,
            "efficiency": {"min": efficiency[0] if efficiency else None,
                           "median": efficiency[len(efficiency) // 2] if efficiency else None},
            "last_rebalance_reasons": dict(rebalance_reasons),
            "operator_metrics": reconcile,
            "baseline_idle_no_jobs": baseline,
            "steady_state": steady,
            "per_job_over_baseline": {
                "rss_mib": round((steady["rss_mib"] - baseline["rss_mib"]) / self.args.jobs, 3),
                "controller_cpu_millicores": round(
                    1000 * (steady["controller_cpu_cores"] - baseline["controller_cpu_cores"]) / self.args.jobs, 3),
                "api_requests_per_minute": round(
                    (steady["api_requests"] / steady["seconds"] - baseline["api_requests"] / baseline["seconds"])
                    * 60 / self.args.jobs, 2)},
            "goals": goals,
        }

    def teardown(self):
        for name, process in reversed(self.processes):
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                    process.wait(timeout=20)
                except (subprocess.TimeoutExpired, ProcessLookupError):
                    try:
                        os.killpg(process.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        if self.cluster_up:
            subprocess.run([os.path.join(ROOT, "tests", "cluster", "down"), "--dir", self.cluster_dir],
                           capture_output=True)
        if not self.args.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            say(f"logs kept in {self.dir}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--workers-per-job", type=int, default=8)
    parser.add_argument("--steps-per-second", type=float, default=2.0, help="per job")
    parser.add_argument("--baseline-seconds", type=float, default=60)
    parser.add_argument("--window-seconds", type=float, default=120)
    parser.add_argument("--settle-seconds", type=float, default=15,
                        help="after the operator starts, and after every job is balanced")
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds from the apply until every job must be balanced")
    parser.add_argument("--status-min-interval", default="",
                        help="the operator's --status-min-interval (default: its own default)")
    parser.add_argument("--start-trainers", choices=["per-job", "after-all-pods"], default="per-job",
                        help="start a job's emulated trainers once its pods run (as kubelets do), "
                             "or all of them once every pod runs")
    parser.add_argument("--operator-arg", action="append", default=[], metavar="ARG",
                        help="one more fulcrum-operator argument (repeat), e.g. --kube-api-qps=100")
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    parser.add_argument("--keep", action="store_true", help="keep the logs (the cluster is stopped)")
    args = parser.parse_args()
    if args.jobs * args.workers_per_job > args.nodes * args.gpus_per_node:
        parser.error("more workers than GPUs: raise --nodes or lower --jobs/--workers-per-job")
    bench = Bench(args)
    # Ctrl-C or SIGTERM: tear down as on any failure.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        result = bench.run()
    except (RuntimeError, KeyboardInterrupt, SystemExit) as error:
        bench.args.keep = True
        say(f"failed: {error}")
        bench.teardown()
        return 1
    except BaseException:
        bench.args.keep = True
        bench.teardown()
        raise
    bench.teardown()
    print(json.dumps(result, indent=2))
    return 0 if all(goal["met"] for goal in result["goals"]) else 3


if __name__ == "__main__":
    sys.exit(main())
