"""docs/examples/ddp_train.py, the complete example of docs/python-runtime.md, trains as the
page says: two ranks against the real fulcrum-coordinator, three epochs, a saved model that
learned something."""

from __future__ import annotations

import pytest
import torch

from conftest import ROOT
from coordinator_harness import LocalCoordinator

pytestmark = pytest.mark.integration


def test_the_documented_script_trains_and_saves_its_model(tmp_path):
    coordinator = LocalCoordinator(tmp_path, "--global-batch", "64", "--min-workers", "2")
    try:
        for index in range(2):
            coordinator.start_worker(f"worker-{index}", "--epochs", "3", "--output",
                                     str(tmp_path / "model.pt"),
                                     script=ROOT / "docs" / "examples" / "ddp_train.py")
        codes = coordinator.wait_for_workers(timeout=300)
    finally:
        coordinator.stop()
    assert set(codes.values()) == {0}, {pod: coordinator.worker_log(pod)[-3000:] for pod in codes}
    saved = torch.load(tmp_path / "model.pt")
    assert saved["step"] == 3 * 4096 // 64
    logs = coordinator.worker_log("worker-0") + coordinator.worker_log("worker-1")
    losses = [float(line.split("loss ")[1].split()[0]) for line in logs.splitlines()
              if "root step" in line and " loss " in line]
    assert losses and losses[-1] < 0.5 * losses[0], losses
