"""Bad input to the Python runtime gets a message that says what is wrong and how to fix it:
a script not running under Fulcrum, a wrong token (refused by the real coordinator), settings
that cannot work, a loss that is not a scalar, and loader arguments that would fight the plan."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import fulcrum
from conftest import PYTHON_DIR
from coordinator_harness import JOB, WORKER, LocalCoordinator, free_port
from fulcrum.pod_environment import JobSpec, PodEnvironment


def test_without_the_operators_environment_init_says_it_is_not_running_under_fulcrum(
        monkeypatch):
    for name in list(os.environ):
        if name.startswith("FULCRUM_"):
            monkeypatch.delenv(name)
    with pytest.raises(fulcrum.NotUnderFulcrumError) as refused:
        fulcrum.init(device="cpu")
    message = str(refused.value)
    assert "FULCRUM_COORDINATOR is not set" in message
    assert "not running under Fulcrum" in message
    assert "fulcrum.init(coordinator=" in message  # how to run it anyway


def test_settings_name_the_variable_and_the_fix(tmp_path):
    token = tmp_path / "token"
    token.write_text("t\n")
    base = {"FULCRUM_COORDINATOR": "127.0.0.1:1", "FULCRUM_JOB": "ns/job",
            "FULCRUM_TOKEN_FILE": str(token), "FULCRUM_COORDINATOR_INSECURE": "true"}
    assert PodEnvironment.read(base).token == "t"
    cases = [
        ({"FULCRUM_JOB": ""}, "FULCRUM_JOB"),
        ({"FULCRUM_COORDINATOR": "no-port"}, "expected HOST:PORT"),
        ({"FULCRUM_TOKEN_FILE": str(tmp_path / "missing")}, "cannot read the job token from"),
        ({"FULCRUM_COORDINATOR_INSECURE": "maybe"}, "expected true or false"),
        ({"FULCRUM_COORDINATOR_INSECURE": "", "FULCRUM_COORDINATOR_CA": str(token)},
         "no PEM certificate in"),
        ({"FULCRUM_COORDINATOR_INSECURE": "",
          "FULCRUM_COORDINATOR_CA": str(tmp_path / "none.crt")}, "FULCRUM_COORDINATOR_INSECURE"),
        ({"FULCRUM_EMULATED_SLOWDOWN": "0.5"}, "expected a number in [1, 100]"),
        ({"FULCRUM_DEVICE": "tpu"}, "FULCRUM_DEVICE='tpu': expected cpu or cuda"),
        ({"FULCRUM_METRICS_PORT": "metrics"}, "FULCRUM_METRICS_PORT='metrics': expected a whole"),
        ({"FULCRUM_METRICS_PORT": "70000"}, "expected a port <= 65535"),
    ]
    for change, expected in cases:
        with pytest.raises(fulcrum.ConfigurationError) as refused:
            PodEnvironment.read({**base, **change})
        assert expected in str(refused.value), (change, str(refused.value))
    with pytest.raises(TypeError, match="unexpected keyword"):
        PodEnvironment.read(base, tokn_file="x")


def test_the_jobs_training_length_seed_and_paths_are_read_and_bad_ones_named():
    spec = JobSpec.read({"FULCRUM_EPOCHS": "3", "FULCRUM_SEED": "5",
                         "FULCRUM_CHECKPOINT_DIR": "/ckpt", "FULCRUM_OUTPUT_DIR": "/out"})
    assert (spec.epochs, spec.steps, spec.seed) == (3, None, 5)
    assert (spec.checkpoint_dir, spec.output_dir, spec.init_from) == ("/ckpt", "/out", None)
    assert JobSpec.read({"FULCRUM_STEPS": "0"}).steps is None  # 0: the job sets none
    assert JobSpec.read({}) == JobSpec()
    for environ, expected in [
            ({"FULCRUM_EPOCHS": "0"}, "$FULCRUM_EPOCHS=0: expected a number >= 1"),
            ({"FULCRUM_STEPS": "ten"}, "$FULCRUM_STEPS='ten': expected a whole"),
            ({"FULCRUM_SEED": "-1"}, "$FULCRUM_SEED=-1: expected a number >= 0")]:
        with pytest.raises(fulcrum.ConfigurationError) as refused:
            JobSpec.read(environ)
        assert expected in str(refused.value)


@pytest.mark.integration
def test_a_wrong_token_is_refused_by_the_coordinator_with_a_clear_message(tmp_path):
    coordinator = LocalCoordinator(tmp_path, "--global-batch", "4")
    try:
        (tmp_path / "wrong-token").write_text("not-the-token\n")
        with pytest.raises(fulcrum.CoordinatorRefusedError) as refused:
            fulcrum.init(device="cpu", coordinator=coordinator.address, job=JOB,
                         token_file=str(tmp_path / "wrong-token"),
                         coordinator_ca=str(tmp_path / "ca.crt"), pod="intruder")
    finally:
        coordinator.stop()
    message = str(refused.value)
    assert "UNAUTHENTICATED" in message and "token" in message
    assert "FULCRUM_TOKEN_FILE" in message


def run_single_rank_worker(tmp_path, *arguments):
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR), OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, str(WORKER), "--out", str(tmp_path / "out.pt"), "--static-rank", "0",
         "--batches", "4", "--rendezvous", f"127.0.0.1:{free_port()}", "--steps", "3",
         *arguments],
        env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.integration
def test_a_loss_that_is_not_a_scalar_is_refused_naming_the_fix(tmp_path):
    done = run_single_rank_worker(tmp_path, "--bad-loss")
    assert done.returncode != 0
    assert "fulcrum.errors.UsageError" in done.stderr
    assert "the loss has shape [4], not a scalar" in done.stderr
    assert "reduction='mean'" in done.stderr


@pytest.mark.integration
def test_loader_arguments_that_decide_the_batch_are_refused(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(
        "import sys, torch, fulcrum\n"
        f"job = fulcrum.init(static_group=fulcrum.StaticGroup(0, [2], sys.argv[1]))\n"
        "data = torch.utils.data.TensorDataset(torch.zeros(8, 1))\n"
        "try:\n"
        "    job.data_loader(data, steps=1, batch_size=4)\n"
        "except fulcrum.UsageError as error:\n"
        "    print('REFUSED', error)\n"
        "try:\n"
        "    job.data_loader(data)\n"
        "except fulcrum.UsageError as error:\n"
        "    print('REFUSED', error)\n"
        "job.shutdown()\n")
    done = subprocess.run([sys.executable, str(script), f"127.0.0.1:{free_port()}"],
                          env=dict(os.environ, PYTHONPATH=str(PYTHON_DIR)),
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    refusals = [line for line in done.stdout.splitlines() if line.startswith("REFUSED")]
    assert len(refusals) == 2, done.stdout
    assert "batch_size=...): Fulcrum decides which samples" in refusals[0]
    assert "give steps= or epochs=" in refusals[1]


def test_a_state_without_the_optimizer_or_with_the_ddp_wrapper_is_refused():
    import torch
    network = torch.nn.Linear(2, 2)
    with pytest.raises(fulcrum.UsageError) as refused:
        fulcrum.State(model=network)
    assert "fulcrum.State(optimizer=...) is missing" in str(refused.value)
    assert "momentum, Adam's moments" in str(refused.value)
    with pytest.raises(fulcrum.UsageError, match="not the model's"):
        fulcrum.State(model=network,
                      optimizer=torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1))
    with pytest.raises(fulcrum.UsageError, match="give the model"):
        fulcrum.State(optimizer=torch.optim.SGD(network.parameters(), lr=0.1))
    state = fulcrum.State(model=network, optimizer=torch.optim.SGD(network.parameters(), lr=0.1),
                          extra={"epoch": 3})
    assert state.state_dict()["extra"] == {"epoch": 3}
