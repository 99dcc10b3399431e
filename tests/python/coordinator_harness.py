"""A real fulcrum-coordinator on loopback (TLS with a CA of the test's own, as the operator's
coordinator serves) and user scripts that join it as real processes. No mocks of our server.

The binary is $FULCRUM_COORDINATOR_BINARY (ctest sets it to the build's) or, when pytest runs by
hand, build/operator/cmd/fulcrum_coordinator/fulcrum-coordinator; without one the tests that
need it are skipped, saying how to build it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional

import pytest

from conftest import PYTHON_DIR, ROOT

sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from free_port import free_port  # noqa: E402,F401 (below the ephemeral range; tests import it here)

JOB = "default/python-job"
TOKEN = "s3cr3t-token-for-tests"
WORKER = Path(__file__).resolve().parent / "runtime_worker.py"


def coordinator_binary() -> Path:
    configured = os.environ.get("FULCRUM_COORDINATOR_BINARY")
    if configured:  # ctest names the build's binary: it must be there
        assert Path(configured).is_file(), f"FULCRUM_COORDINATOR_BINARY={configured} is missing"
        return Path(configured)
    path = ROOT / "build" / "operator" / "cmd" / "fulcrum_coordinator" / "fulcrum-coordinator"
    if not path.is_file():
        pytest.skip(f"no fulcrum-coordinator at {path}: build it (cmake --build build --target "
                    "fulcrum-coordinator) or set FULCRUM_COORDINATOR_BINARY")
    return path


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def make_certificates(directory: Path) -> None:
    """ca.crt, and tls.crt/tls.key for 127.0.0.1 signed by it."""
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
             "-subj", "/CN=fulcrum-test-ca", cwd=directory)
    _openssl("req", *curve, "-keyout", "tls.key", "-out", "tls.csr", "-subj",
             "/CN=fulcrum-coordinator", cwd=directory)
    (directory / "serving.ext").write_text(
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "tls.crt", "-days", "1", "-extfile", "serving.ext",
             cwd=directory)


class LocalCoordinator:
    """fulcrum-coordinator serving JOB over TLS; workers are runtime_worker.py processes."""

    def __init__(self, directory: Path, *arguments: str):
        self.directory = directory
        (directory / "tokens").write_text(f"{JOB} {TOKEN}\n")
        (directory / "token").write_text(TOKEN + "\n")
        make_certificates(directory)
        self.log = directory / "coordinator.log"
        self.state_file = directory / "state.json"
        command = [str(coordinator_binary()), "--listen", "127.0.0.1:0",
                   "--job-token-file", str(directory / "tokens"),
                   "--state-file", str(self.state_file),
                   "--tls-cert", str(directory / "tls.crt"),
                   "--tls-key", str(directory / "tls.key"), *arguments]
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        self.workers: dict[str, subprocess.Popen] = {}
        self.port = 0

        def listening() -> bool:
            for line in self.log.read_text().splitlines():
                if '"listening"' in line:
                    self.port = json.loads(line).get("port", 0)
            assert self.process.poll() is None, self.log.read_text()
            return self.port > 0
        wait_until(listening, 30, "the coordinator to listen")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def environment(self, pod: str, **overrides: str) -> dict[str, str]:
        """What the operator puts in a trainer pod, pointing at this coordinator."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("FULCRUM_")}
        env.update(FULCRUM_COORDINATOR=self.address, FULCRUM_JOB=JOB,
                   FULCRUM_TOKEN_FILE=str(self.directory / "token"),
                   FULCRUM_COORDINATOR_CA=str(self.directory / "ca.crt"),
                   POD_NAME=pod, NODE_NAME="node-" + pod, POD_IP="127.0.0.1",
                   PYTHONPATH=str(PYTHON_DIR), OMP_NUM_THREADS="1")
        env.update(overrides)
        return env

    def start_worker(self, pod: str, *arguments: str, env: Optional[dict] = None,
                     script: Path = WORKER) -> subprocess.Popen:
        with open(self.directory / f"{pod}.log", "w") as log:
            process = subprocess.Popen([sys.executable, str(script), *arguments],
                                       env=env or self.environment(pod), stdout=log,
                                       stderr=subprocess.STDOUT)
        self.workers[pod] = process
        return process

    def run_logged_workers(self, pods, *arguments: str, timeout: float = 240,
                           slowdowns: Optional[dict[str, float]] = None) -> dict[str, int]:
        """runtime_worker.py as each of `pods` with `arguments`, saving to <dir>/<pod>.pt and
        logging its steps to <dir>/<pod>.jsonl, `slowdowns[pod]` times slower (EMULATED) where
        given; waits for all and returns their exit codes."""
        for pod in pods:
            overrides = {"FULCRUM_SAMPLE_LOG": str(self.directory / f"{pod}.jsonl")}
            if slowdowns and pod in slowdowns:
                overrides["FULCRUM_EMULATED_SLOWDOWN"] = str(slowdowns[pod])
            self.start_worker(pod, "--out", str(self.directory / f"{pod}.pt"), *arguments,
                              env=self.environment(pod, **overrides))
        return self.wait_for_workers(timeout=timeout)

    def worker_log(self, pod: str) -> str:
        return (self.directory / f"{pod}.log").read_text()

    def wait_for_workers(self, timeout: float) -> dict[str, int]:
        """Every worker's exit code, or an error naming the first that did not end."""
        deadline = time.monotonic() + timeout
        codes = {}
        for pod, process in self.workers.items():
            try:
                codes[pod] = process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise AssertionError(f"worker {pod} still runs after {timeout} s:\n"
                                     + self.worker_log(pod)[-3000:]) from None
        return codes

    def state(self) -> dict:
        try:
            jobs = json.loads(self.state_file.read_text())["jobs"]
        except (OSError, ValueError, KeyError):
            return {}
        return next((job for job in jobs if job["name"] == JOB), {})

    def stop(self) -> None:
        for process in self.workers.values():
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
