"""Speed of ``pretrain-tiny``: seconds per training step and the projected full-run time.

    .venv/bin/python benchmarks/pretrain_tiny.py [--steps 20] [--set hidden_size=256 ...]

Times ``--steps`` optimizer steps (after 3 warm-up steps) of the tiny-profile ``PretrainConfig``
on this machine's CPU and prints one JSON object: s/step, tokens/step, parameters and the
projected minutes for ``max_steps``. It writes nothing.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from pr1lib.config import PretrainConfig
from pr1lib.config.arguments import Parser, count
from pr1lib.config.runtime import quiet_known_noise, set_seed
from pr1lib.training.pretrain import (
    accumulate_loss,
    build_tokenizer_and_model,
    encode_batch,
    step_records,
)


def time_steps(cfg: PretrainConfig, steps: int, warmup: int = 3) -> dict:
    """Run ``warmup + steps`` training steps; return timing and size figures."""
    torch.set_num_threads(cfg.num_threads)
    set_seed(cfg.seed)
    tokenizer, model = build_tokenizer_and_model(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate)
    tokens, start = 0, 0.0
    for step in range(warmup + steps):
        if step == warmup:
            start = time.perf_counter()
        records = step_records(cfg, step)
        opt.zero_grad()
        loss = accumulate_loss(model, tokenizer, records, cfg.length_buckets)
        opt.step()
        tokens += (
            int(encode_batch(tokenizer, records)["attention_mask"].sum()) if step >= warmup else 0
        )
    per_step = (time.perf_counter() - start) / steps
    return {
        "s_per_step": round(per_step, 4),
        "tokens_per_step": tokens / steps,
        "parameters": model.num_parameters(),
        "max_steps": cfg.max_steps,
        "projected_minutes": round(per_step * cfg.max_steps / 60, 2),
        "threads": cfg.num_threads,
        "loss_last": round(loss, 4),
    }


def arguments() -> argparse.ArgumentParser:
    """This script's flags, each checked as it is parsed (a bad one: one line, exit 2)."""
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=count(1), default=20)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    return parser


def main(argv: list[str] | None = None) -> None:
    quiet_known_noise()  # the notes the CLI drops (pr1lib.config.runtime.NOISE_LOGS)
    parser = arguments()
    args = parser.parse_args(argv)
    cfg = PretrainConfig.for_profile("tiny", **parser.sets(PretrainConfig, args.overrides))
    print(json.dumps({"benchmark": "pretrain_tiny", **time_steps(cfg, args.steps)}))


if __name__ == "__main__":
    main()
