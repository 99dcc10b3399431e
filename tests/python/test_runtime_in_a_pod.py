"""A script run as the operator runs a runtime python job's pod: the job's training length and
seed come from FULCRUM_EPOCHS / FULCRUM_STEPS / FULCRUM_SEED (operator/controller/job_objects.cc,
PythonRuntimeEnv), the pod serves the trainer's Prometheus series on FULCRUM_METRICS_PORT under
the names the chart's dashboard and alerts query, and Kubernetes' SIGTERM ends it cleanly after
a step."""

from __future__ import annotations

import re
import signal
import urllib.request

import pytest
import torch

from conftest import ROOT
from coordinator_harness import JOB, LocalCoordinator, free_port, wait_until

pytestmark = pytest.mark.integration


def test_without_steps_or_epochs_the_loader_trains_the_jobs_epochs(tmp_path):
    coordinator = LocalCoordinator(tmp_path, "--global-batch", "16", "--min-workers", "1")
    try:
        # runtime_worker.py passes neither --steps nor --epochs to job.data_loader().
        coordinator.start_worker("a", "--out", str(tmp_path / "a.pt"), env=coordinator.environment(
            "a", FULCRUM_EPOCHS="2", FULCRUM_STEPS=""))
        codes = coordinator.wait_for_workers(timeout=240)
    finally:
        coordinator.stop()
    assert codes == {"a": 0}, coordinator.worker_log("a")[-3000:]
    result = torch.load(tmp_path / "a.pt")
    assert result["cursor"] == 2 * 200  # two epochs of the worker's 200 samples
    assert result["step"] == 25


def queried_trainer_series() -> set[str]:
    """The fulcrum_trainer_* series the chart's dashboard and alerts query, by base name."""
    text = (ROOT / "helm/fulcrum/dashboards/fulcrum.json").read_text()
    text += (ROOT / "helm/fulcrum/alerts/fulcrum.rules.yaml").read_text()
    return {re.sub(r"_(bucket|sum|count)$", "", name)
            for name in re.findall(r"fulcrum_trainer_[a-z_]+", text)}


def test_the_pod_serves_the_series_the_dashboard_queries_and_sigterm_ends_it_after_a_step(
        tmp_path):
    assert queried_trainer_series(), "the dashboard queries no trainer series"
    port = free_port()
    coordinator = LocalCoordinator(tmp_path, "--global-batch", "16", "--min-workers", "1")
    served = ""
    try:
        worker = coordinator.start_worker("a", "--out", str(tmp_path / "a.pt"),
                                          env=coordinator.environment(
                                              "a", FULCRUM_STEPS="1000000",
                                              FULCRUM_METRICS_PORT=str(port)))

        def scraped() -> bool:
            nonlocal served
            assert worker.poll() is None, coordinator.worker_log("a")[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as got:
                    served = got.read().decode()
            except OSError:
                return False
            step = re.search(r'^fulcrum_trainer_step\{[^}]*\} (\S+)$', served, re.M)
            return step is not None and float(step.group(1)) >= 3
        wait_until(scraped, 120, "three steps on the metrics endpoint")
        worker.send_signal(signal.SIGTERM)
        codes = coordinator.wait_for_workers(timeout=120)
    finally:
        coordinator.stop()
    for name in queried_trainer_series():
        assert re.search(rf"^{name}(_bucket|_total)?\{{", served, re.M), (name, served)
    assert f'job_name="{JOB}",pod="a"' in served
    assert codes == {"a": 0}, coordinator.worker_log("a")[-3000:]
    assert "SIGTERM: leaving the job after the current step" in coordinator.worker_log("a")
    assert torch.load(tmp_path / "a.pt")["step"] >= 3
