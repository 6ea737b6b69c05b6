"""``python -m pr1lib ARGS`` plus a per-rank fingerprint of the trained weights (for test_accelerate).

Launched by ``accelerate launch ... tests/_accelerate_fingerprint.py sft --profile smoke ...``: the
command runs exactly as ``-m pr1lib`` would, and every ``Trainer.train`` call also writes
``$PR1_FINGERPRINT_DIR/rank<R>-<n>.json`` with a hash of the trainable weights before and after.
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


_train = Trainer.train
_calls = [0]


def train(self, *args, **kwargs):
    """``Trainer.train`` that also writes this rank's fingerprint record."""
    before, _ = fingerprint(self.model)
    out = _train(self, *args, **kwargs)
    after, count = fingerprint(self.model)
    world = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
    rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
    folder = Path(os.environ["PR1_FINGERPRINT_DIR"])
    folder.mkdir(parents=True, exist_ok=True)
    record = {"rank": rank, "world_size": world, "backend": torch.distributed.get_backend() if world > 1 else None,
              "global_step": self.state.global_step, "before": before, "after": after, "values": count}
    (folder / f"rank{rank}-{_calls[0]}.json").write_text(json.dumps(record))
    _calls[0] += 1
    return out


if __name__ == "__main__":  # patch only when run as the launcher's script, never on import
    from pr1lib.cli import main

    Trainer.train = train

    sys.exit(main(sys.argv[1:]))
