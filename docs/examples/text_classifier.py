"""The model contract of docs/user-guide.md, end to end: a dataset with two inputs and a
label, packed with fulcrum.pack, and a module whose forward takes both inputs by name and
whose loss method returns the sum over the batch, scripted and saved for fulcrum-trainer.

    PYTHONPATH=python python3 docs/examples/text_classifier.py /tmp/example
    kubectl apply -f crds/examples/own-model.yaml     # paths under /tmp/example

It writes DIR/data (2048 training samples), DIR/heldout (512 for evaluation) and DIR/model.pt.

The task: a sentence is up to 12 token ids out of 50 with a mask; its class is whether most
of its real tokens come from the lower or the upper half of the vocabulary.
"""

import sys
from pathlib import Path
from typing import Dict

import numpy as np
import torch
from torch import Tensor, nn

from fulcrum import pack

VOCABULARY, LENGTH = 50, 12


def make_dataset(directory: Path, samples: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    input_ids = rng.integers(1, VOCABULARY, size=(samples, LENGTH), dtype=np.int64)
    lengths = rng.integers(4, LENGTH + 1, size=samples)
    attention_mask = (np.arange(LENGTH) < lengths[:, None]).astype(np.float32)
    input_ids[attention_mask == 0] = 0  # padding
    upper = ((input_ids >= VOCABULARY // 2) * attention_mask).sum(1)
    label = (upper * 2 > attention_mask.sum(1)).astype(np.int64)
    pack.write_arrays(directory, {"input_ids": input_ids, "attention_mask": attention_mask,
                                  "label": label}, classes={"label": 2}, force=True)


class BagOfEmbeddings(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCABULARY, 32)
        self.classify = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))

    # The trainer passes the dataset fields named here; `label` is not passed, as forward
    # does not ask for it.
    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        mask = attention_mask.unsqueeze(-1)
        pooled = (self.embed(input_ids) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.classify(pooled)

    # Optional. `batch` holds every field, the label too. It must return the SUM over the
    # batch's samples: workers train unequal batches and the trainer divides by the global
    # batch itself.
    @torch.jit.export
    def loss(self, outputs: Tensor, batch: Dict[str, Tensor]) -> Tensor:
        return nn.functional.cross_entropy(outputs, batch["label"], reduction="sum")


def main() -> None:
    out = Path(sys.argv[1])
    make_dataset(out / "data", samples=2048, seed=0)
    make_dataset(out / "heldout", samples=512, seed=1)
    torch.manual_seed(0)
    module = torch.jit.script(BagOfEmbeddings())
    module.save(str(out / "model.pt"))
    print(f"wrote {out / 'data'}, {out / 'heldout'} and {out / 'model.pt'}")


if __name__ == "__main__":
    main()
