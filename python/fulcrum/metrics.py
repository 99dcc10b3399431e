"""The trainer's Prometheus series, as fulcrum-trainer serves them
(trainer_image/trainer/loop/trainer_metrics.cc): same names, help, labels and buckets, so the
chart's PodMonitor, the dashboard and the alerts treat a Python job's pods like any other.

Served only when prometheus_client is installed (Debian: python3-prometheus-client; pip:
prometheus-client) and a port is set (FULCRUM_METRICS_PORT, which the operator sets to the
pod's `metrics` port); otherwise every call is a no-op. Its own registry: nothing of the user's
process-wide default registry is exposed or touched."""

from __future__ import annotations

import logging
from typing import Optional

from fulcrum.errors import ConfigurationError

log = logging.getLogger("fulcrum")

# fulcrum-trainer's step-time buckets, in seconds.
STEP_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class TrainerMetrics:
    def __init__(self, job: str, pod: str, port: Optional[int], host: str):
        self.port: Optional[int] = None
        self._series = None
        if port is None:
            return
        try:
            import prometheus_client as prometheus
        except ImportError:
            log.warning("no Prometheus series on port %d: prometheus_client is not installed "
                        "(pip install prometheus-client, or Debian's python3-prometheus-client)",
                        port)
            return
        registry = prometheus.CollectorRegistry(auto_describe=True)
        labels = ("job_name", "pod")

        def gauge(name: str, text: str):
            return prometheus.Gauge(name, text, labels, registry=registry).labels(job, pod)

        self._series = {
            # prometheus_client adds _total to a counter's name itself.
            "step_seconds": prometheus.Histogram(
                "fulcrum_trainer_step_seconds", "Wall time of one optimizer step", labels,
                buckets=STEP_SECONDS_BUCKETS, registry=registry).labels(job, pod),
            "samples": prometheus.Counter(
                "fulcrum_trainer_samples", "Samples this trainer trained on", labels,
                registry=registry).labels(job, pod),
            "data_wait": prometheus.Counter(
                "fulcrum_trainer_data_wait_seconds",
                "Time steps waited for their batch before compute (reading, copying to the "
                "device); its rate over the step time's is the data-bound fraction", labels,
                registry=registry).labels(job, pod),
            "local_batch": gauge("fulcrum_trainer_local_batch", "Local batch of the last step"),
            "loss": gauge("fulcrum_trainer_loss", "Global mean training loss of the last step"),
            "generation": gauge("fulcrum_trainer_generation", "Membership generation"),
            "step": gauge("fulcrum_trainer_step", "Optimizer steps completed"),
        }
        try:
            prometheus.start_http_server(port, addr=host, registry=registry)
        except OSError as error:
            raise ConfigurationError(
                f"cannot serve the Prometheus series on {host}:{port} (FULCRUM_METRICS_PORT, "
                f"POD_IP): {error.strerror}") from None
        self.port = port
        log.info("Prometheus series on %s:%d/metrics", host, port)

    def observe_step(self, step_seconds: float, data_wait_seconds: float, local_batch: int,
                     loss: float, generation: int, step: int) -> None:
        series = self._series
        if series is None:
            return
        series["step_seconds"].observe(step_seconds)
        series["samples"].inc(local_batch)
        series["data_wait"].inc(data_wait_seconds)
        series["local_batch"].set(local_batch)
        series["loss"].set(loss)
        series["generation"].set(generation)
        series["step"].set(step)
