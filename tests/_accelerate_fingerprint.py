"""``python -m pr1lib ARGS`` plus a per-rank fingerprint of the trained weights (for
test_accelerate).

Launched by ``accelerate launch ... tests/_accelerate_fingerprint.py sft --profile smoke ...`` (or
run as ``python tests/_accelerate_fingerprint.py ...`` for the one-process reference): the command
runs exactly as ``-m pr1lib`` would, and every ``Trainer.train`` call also writes
``$PR1_FINGERPRINT_DIR/rank<R>-<n>.json`` with a hash of the trainable weights before and after and
the ids of the samples this rank trained on at each optimizer step, and ``rank<R>-<n>.pt`` with the
trainable weights after training.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import torch
from transformers import Trainer


def fingerprint(model) -> tuple[str, int]:
    """sha256 over the trainable tensors (name order), and how many values they hold."""
    digest, count = hashlib.sha256(), 0
    for name, param in sorted(model.named_parameters(), key=lambda kv: kv[0]):
        if param.requires_grad:
            values = param.detach().to("cpu", torch.float32).contiguous()
            digest.update(name.encode())
            digest.update(values.numpy().tobytes())
            count += values.numel()
    return digest.hexdigest(), count


def sample_id(sample, pad_id) -> str:
    """A short hash of one training sample: its token ids without trailing padding (SFT's collated
    rows), or its prompt text (GRPO's dataset rows)."""
    if isinstance(sample, dict):
        text = str(sample.get("prompt"))
    else:
        ids = [int(t) for t in sample]
        while ids and ids[-1] == pad_id:
            ids.pop()
        text = json.dumps(ids)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def batch_ids(inputs, pad_id) -> list[str]:
    """The ids of one micro-batch as ``Trainer.training_step`` receives it."""
    if isinstance(inputs, dict):  # collated tensors (SFT)
        return [sample_id(row, pad_id) for row in inputs["input_ids"].tolist()]
    return [sample_id(row, pad_id) for row in inputs]  # dataset rows, before generation (GRPO)


_train, _training_step = Trainer.train, Trainer.training_step
_calls = [0]
_samples: dict[int, list[str]] = {}  # optimizer step (1-based) -> ids of the samples it trained on


def training_step(self, model, inputs, *args, **kwargs):
    """``Trainer.training_step`` that also records the ids of this rank's micro-batch."""
    pad_id = getattr(self.processing_class, "pad_token_id", None)
    _samples.setdefault(self.state.global_step + 1, []).extend(batch_ids(inputs, pad_id))
    return _training_step(self, model, inputs, *args, **kwargs)


def train(self, *args, **kwargs):
    """``Trainer.train`` that also writes this rank's fingerprint record."""
    before, _ = fingerprint(self.model)
    _samples.clear()
    out = _train(self, *args, **kwargs)
    after, count = fingerprint(self.model)
    world = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
    rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
    folder = Path(os.environ["PR1_FINGERPRINT_DIR"])
    folder.mkdir(parents=True, exist_ok=True)
    weights = folder / f"rank{rank}-{_calls[0]}.pt"
    torch.save(
        {
            n: p.detach().to("cpu", torch.float32).clone()
            for n, p in self.model.named_parameters()
            if p.requires_grad
        },
        weights,
    )
    backend = torch.distributed.get_backend() if world > 1 else None
    record = {
        "rank": rank,
        "world_size": world,
        "backend": backend,
        "global_step": self.state.global_step,
        "before": before,
        "after": after,
        "values": count,
        "samples": [_samples[step] for step in sorted(_samples)],
        "weights": str(weights),
    }
    (folder / f"rank{rank}-{_calls[0]}.json").write_text(json.dumps(record))
    _calls[0] += 1
    return out


if __name__ == "__main__":  # patch only when run as the launcher's script, never on import
    from pr1lib.cli.main import main

    Trainer.train, Trainer.training_step = train, training_step

    sys.exit(main(sys.argv[1:]))
