"""Speed of a GRPO step on the tiny profile, the first path versus today's; prints one JSON object.

    .venv/bin/python benchmarks/grpo.py [--model DIR] [--steps 3] [--repeats 2] [--quick]
    .venv/bin/python -m pr1lib bench grpo [--model DIR]     # the same, through the CLI

For each variant (``seen``: re-read rollouts and the causal loss; ``unseen``: forked rollouts
and the path-isolating loss) a fresh copy of the same policy trains ``--steps`` Stage-3 steps
(accuracy reward, the tiny profile's batch and lengths, the same seed) three times: with the
first settings (``before``: ``merge_rollout_lora=False, fast_cache=False, length_buckets=1,
share_prompts=False``: LoRA layers in the rollout, a ``torch.cat`` KV cache and re-reads on every
row, one padded loss batch with every row's prompt; one torch thread, the default then), with
today's defaults on one thread (``one_thread``) and with today's defaults (``after``: the
profile's ``num_threads``, ``profiles.TINY_THREADS``).
Repeats are interleaved so that load from other processes hits both alike; the first step of
every run is a warm-up and is not counted.

Reported per variant and path: seconds per step (wall) and CPU seconds of this process per step
(other jobs on a shared machine disturb those less; they count every thread), completions per
second, and the rollout's share of the step. Ratios: ``speedup`` (completions/s after over
before, geometric mean of the variants; ``seen_speedup``, ``unseen_speedup`` each),
``cpu_speedup`` (the same on CPU seconds), ``step_after_over_before`` and ``threads_speedup``
(one thread over the profile's, today's settings). The paths sample the same completions (same
seed, same model: ``same_batches``, before against after) and reach the same losses
(``loss_max_abs_diff``; the thread count changes only the last floating-point bits).

The model is ``--model`` (a folder or run folder), else the profile's (``data/tiny-base``,
which opens no blocks: give an SFT checkpoint to time the parallel engine for real).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from pr1lib.config import GRPOStageConfig
from pr1lib.config.arguments import Parser, count, model_folder
from pr1lib.config.runtime import quiet_known_noise
from pr1lib.decoding.models import load_training_policy, stage_model_config
from pr1lib.training.grpo import GRPOSession

BEFORE = dict(
    merge_rollout_lora=False,
    fast_cache=False,
    length_buckets=1,
    share_prompts=False,
    num_threads=1,
)  # the first path
PATHS = {"before": BEFORE, "one_thread": dict(num_threads=1), "after": {}}
VARIANTS = ("seen", "unseen")


class StepClock(TrainerCallback):
    """Wall and CPU seconds of every optimizer step, and the rollout's seconds in it."""

    def __init__(self, session: GRPOSession) -> None:
        self.session, self.steps = session, []

    def on_step_begin(self, args, state, control, **kwargs):
        rollout = self.session.trainer.rollout_func.seconds
        self.start = (time.perf_counter(), time.process_time(), rollout)

    def on_step_end(self, args, state, control, **kwargs):
        wall, cpu, rollout = self.start
        self.steps.append(
            {
                "wall": time.perf_counter() - wall,
                "cpu": time.process_time() - cpu,
                "rollout": self.session.trainer.rollout_func.seconds - rollout,
            }
        )


def train(cfg: GRPOStageConfig, policy: tuple, folder: Path) -> dict[str, Any]:
    """``cfg.max_steps`` steps from a copy of ``policy``: per-step times and the logged rows."""
    model, tokenizer, lora = policy
    fresh = (copy.deepcopy(model), tokenizer, copy.deepcopy(lora))
    session = GRPOSession(cfg, out=folder, policy=fresh)
    clock = StepClock(session)
    session.run(callbacks=[clock])
    return {"steps": clock.steps, "rows": session.rows}


def summary(runs: list[dict], batch: int) -> dict[str, float]:
    """Medians over the timed steps (the first step of each run is left out)."""
    steps = [s for run in runs for s in run["steps"][1:]]
    wall, cpu = (statistics.median(s[k] for s in steps) for k in ("wall", "cpu"))
    rollout = statistics.median(s["rollout"] / s["wall"] for s in steps)
    return {
        "seconds_per_step": round(wall, 3),
        "cpu_seconds_per_step": round(cpu, 3),
        "completions_per_s": round(batch / wall, 2),
        "cpu_completions_per_s": round(batch / cpu, 2),
        "rollout_share": round(rollout, 3),
        "timed_steps": len(steps),
    }


def compare(before: list[dict], after: list[dict]) -> tuple[bool, float]:
    """Did both paths train on the same batches (lengths, rewards), how far apart are the losses?"""
    keys = ("completions/mean_length", "reward")
    pairs = [(x, y) for a, b in zip(before, after) for x, y in zip(a["rows"], b["rows"])]
    same = all(x[k] == y[k] for x, y in pairs for k in keys)
    return same, max(abs(x["loss"] - y["loss"]) for x, y in pairs)


def run(
    model: str | None = None, steps: int = 3, repeats: int = 2, quick: bool = False
) -> dict[str, Any]:
    """All measurements as one dict (``quick``: the smoke profile, 2 steps, one repeat)."""
    profile, steps, repeats = ("smoke", 2, 1) if quick else ("tiny", steps, repeats)
    base = GRPOStageConfig.for_stage(3, profile, reward="accuracy", max_steps=steps)
    policy = load_training_policy(stage_model_config(base, model), base.train_tag_rows)
    results: dict[str, dict[str, list]] = {v: {p: [] for p in PATHS} for v in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats):
            for variant in VARIANTS:
                for path, flags in PATHS.items():
                    cfg = GRPOStageConfig.for_stage(
                        3,
                        profile,
                        variant=variant,
                        reward="accuracy",
                        max_steps=steps,
                        save_steps=10_000,
                        **flags,
                    )
                    folder = Path(tmp) / f"{variant}-{path}-{r}"
                    results[variant][path].append(train(cfg, policy, folder))
    return report(results, base, model, steps, repeats)


def report(
    results: dict, base: GRPOStageConfig, model: str | None, steps: int, repeats: int
) -> dict[str, Any]:
    """The JSON: per variant and path, the ratios, and the equivalence checks."""
    batch = base.per_device_train_batch_size
    out: dict[str, Any] = {
        "benchmark": "grpo",
        "model_source": model or stage_model_config(base).name,
        "profile": base.profile,
        "threads": {
            path: flags.get("num_threads", base.num_threads) for path, flags in PATHS.items()
        },
        "steps": steps,
        "repeats": repeats,
        "completions_per_step": batch,
        "before_flags": BEFORE,
    }
    same_all, diffs, speed, cpu_speed = True, [], [], []
    for variant, paths in results.items():
        before, after = summary(paths["before"], batch), summary(paths["after"], batch)
        same, diff = compare(paths["before"], paths["after"])
        same_all, diffs = same_all and same, diffs + [diff]
        speed.append(after["completions_per_s"] / before["completions_per_s"])
        cpu_speed.append(after["cpu_completions_per_s"] / before["cpu_completions_per_s"])
        ratio = after["seconds_per_step"] / before["seconds_per_step"]
        one = summary(paths["one_thread"], batch)
        out[variant] = {
            "before": before,
            "one_thread": one,
            "after": after,
            "step_after_over_before": round(ratio, 3),
            "threads_speedup": round(one["seconds_per_step"] / after["seconds_per_step"], 3),
        }
        out[f"{variant}_speedup"] = round(speed[-1], 3)
        out[f"{variant}_cpu_speedup"] = round(cpu_speed[-1], 3)
    out["same_batches"], out["loss_max_abs_diff"] = same_all, max(diffs)
    out["cpu_speedup"] = round(math.prod(cpu_speed) ** (1 / len(cpu_speed)), 3)
    out["speedup"] = round(math.prod(speed) ** (1 / len(speed)), 3)
    return out


def arguments() -> argparse.ArgumentParser:
    """This script's flags, each checked as it is parsed (a bad one: one line, exit 2)."""
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", type=model_folder, default=None, help="model or run folder (default: profile's)"
    )
    parser.add_argument(
        "--steps", type=count(2), default=3, help="steps per run (the first is warm-up)"
    )
    parser.add_argument("--repeats", type=count(1), default=2)
    parser.add_argument("--quick", action="store_true", help="smoke profile, 2 steps, one repeat")
    return parser


def main(argv: list[str] | None = None) -> None:
    quiet_known_noise()  # the notes the CLI drops (pr1lib.config.runtime.NOISE_LOGS)
    args = arguments().parse_args(argv)
    print(json.dumps(run(args.model, args.steps, args.repeats, args.quick)))


if __name__ == "__main__":
    main()
