"""Writes the TorchScript modules and the packed dataset the model-contract tests train
(tests/trainer_image/model_contract_test.cc), with Debian's python3-torch:

    make_contract_models.py DIRECTORY

DIRECTORY/data: a packed dataset of 96 samples with three fields: tokens (int64 [6], ids
in [0, 20)), mask (float32 [6], ones then zeros) and label (int64, 3 classes: which third of
the vocabulary most unmasked tokens fall in). DIRECTORY/heldout: 50 more such samples, for
evaluation; DIRECTORY/no_mask: tokens and label only (an evaluation set that does not fit).
Modules, all with a loss method unless named:
  two_inputs.pt    forward(self, tokens, mask); summed cross-entropy; the embedding is frozen
                   (requires_grad=False) and holds 0.01 * arange, which training must not move
  dict_input.pt    forward(self, batch: Dict[str, Tensor]), the same network
  batchnorm.pt     forward(self, tokens, mask) with a BatchNorm1d; default loss (no loss method)
  mean_loss.pt     a loss method that returns the mean           (refused)
  vector_loss.pt   a loss method that returns one loss per sample (refused)
  missing_field.pt forward(self, tokens, segments): no such field (refused)
  half.pt          float16 parameters                             (refused)
  wider.pt         the two-input network with a wider hidden layer (--init-from shapes differ)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict

import numpy as np
import torch
from torch import Tensor, nn

VOCABULARY, LENGTH, CLASSES, SAMPLES = 20, 6, 3, 96


def write_dataset(directory: Path, samples: int = SAMPLES, seed: int = 5,
                  with_mask: bool = True) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, VOCABULARY, size=(samples, LENGTH), dtype=np.int64)
    lengths = rng.integers(3, LENGTH + 1, size=samples)
    mask = (np.arange(LENGTH)[None, :] < lengths[:, None]).astype(np.float32)
    thirds = tokens * CLASSES // VOCABULARY
    label = np.array([np.bincount(t[m > 0], minlength=CLASSES).argmax()
                      for t, m in zip(thirds, mask)], dtype=np.int64)
    np.save(directory / "tokens.npy", tokens)
    np.save(directory / "mask.npy", mask)
    np.save(directory / "label.npy", label)
    fields = [
        {"name": "tokens", "dtype": "int64", "shape": [LENGTH], "file": "tokens.npy"},
        {"name": "mask", "dtype": "float32", "shape": [LENGTH], "file": "mask.npy"},
        {"name": "label", "dtype": "int64", "shape": [], "file": "label.npy",
         "classes": CLASSES},
    ]
    if not with_mask:
        fields = [fields[0], fields[2]]
    (directory / "dataset.json").write_text(json.dumps({
        "format": "fulcrum.dataset", "version": 1, "samples": samples, "fields": fields}))


class Encoder(nn.Module):
    """Masked mean of token embeddings, then an MLP to class logits."""

    def __init__(self, hidden: int = 16, batch_norm: bool = False) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCABULARY, 8)
        with torch.no_grad():
            self.embed.weight.copy_(0.01 * torch.arange(VOCABULARY * 8.0).view(VOCABULARY, 8))
        self.embed.weight.requires_grad_(False)
        self.hidden = nn.Linear(8, hidden)
        self.norm = nn.BatchNorm1d(hidden) if batch_norm else nn.Identity()
        self.out = nn.Linear(hidden, CLASSES)

    def encode(self, tokens: Tensor, mask: Tensor) -> Tensor:
        pooled = (self.embed(tokens) * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)
        return self.out(torch.relu(self.norm(self.hidden(pooled))))


class TwoInputs(Encoder):
    def forward(self, tokens: Tensor, mask: Tensor) -> Tensor:
        return self.encode(tokens, mask)

    @torch.jit.export
    def loss(self, outputs: Tensor, batch: Dict[str, Tensor]) -> Tensor:
        return nn.functional.cross_entropy(outputs, batch["label"], reduction="sum")


class DictInput(Encoder):
    def forward(self, batch: Dict[str, Tensor]) -> Tensor:
        return self.encode(batch["tokens"], batch["mask"])

    @torch.jit.export
    def loss(self, outputs: Tensor, batch: Dict[str, Tensor]) -> Tensor:
        return nn.functional.cross_entropy(outputs, batch["label"], reduction="sum")


class WithBatchNorm(Encoder):
    def __init__(self) -> None:
        super().__init__(batch_norm=True)

    def forward(self, tokens: Tensor, mask: Tensor) -> Tensor:
        return self.encode(tokens, mask)


class MeanLoss(TwoInputs):
    @torch.jit.export
    def loss(self, outputs: Tensor, batch: Dict[str, Tensor]) -> Tensor:
        return nn.functional.cross_entropy(outputs, batch["label"], reduction="mean")


class VectorLoss(TwoInputs):
    @torch.jit.export
    def loss(self, outputs: Tensor, batch: Dict[str, Tensor]) -> Tensor:
        return nn.functional.cross_entropy(outputs, batch["label"], reduction="none")


class MissingField(Encoder):
    def forward(self, tokens: Tensor, segments: Tensor) -> Tensor:
        return self.encode(tokens, segments)


def main() -> None:
    directory = Path(sys.argv[1])
    write_dataset(directory / "data")
    write_dataset(directory / "heldout", samples=50, seed=6)
    write_dataset(directory / "no_mask", samples=10, seed=7, with_mask=False)
    torch.manual_seed(3)
    modules = {
        "two_inputs": TwoInputs(), "dict_input": DictInput(), "batchnorm": WithBatchNorm(),
        "mean_loss": MeanLoss(), "vector_loss": VectorLoss(), "missing_field": MissingField(),
        "half": TwoInputs().half(), "wider": TwoInputs(hidden=24),
    }
    for name, module in modules.items():
        torch.jit.save(torch.jit.script(module), str(directory / f"{name}.pt"))


if __name__ == "__main__":
    main()
