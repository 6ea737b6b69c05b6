"""Minutes on one Colab T4, computed from the configs: what sizes the ``colab`` notebook runs.

No GPU has run the colab path yet, so every rate in ``T4`` is an assumption, stated here and
printed with the arithmetic in notebooks 04 and 06 (which it keeps under an hour each):

* ``decode_step_s``: one step of the rollout engine for up to 64 rows of Qwen3-0.6B in NF4 (the
  4-bit kernels and Python overhead dominate, so the step barely depends on the rows);
* ``train_tokens_per_s``: QLoRA training with gradient checkpointing, forward and backward
  (about 6 x 0.6 GFLOP per token at ~7 TFLOP/s, a tenth of the T4's fp16 peak);
* ``run_overhead_s``: per run, loading the 4-bit model, then saving the adapter and merged copy;
* ``prompt_tokens``, ``sft_row_tokens``: the v3 prompt, and one GSM8K cold-start row with it.

A run's seconds are its steps (one decode of ``max_completion_length`` steps, then training on
prompt + completion tokens), its held-out evaluations (per tier: a sampled pass, k per prompt,
and a greedy one, 32 prompts per generation call) and the overhead.

>>> round(eval_seconds(n=16, k=2, new_tokens=100, tiers=2), 1)  # 2 tiers x 2 passes x 100 steps
20.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pr1lib.config import GRPOStageConfig, SFTStageConfig
from pr1lib.experiments.ablation import ARMS, VARIANT


@dataclass(frozen=True)
class Rates:
    """Assumed throughput of one GPU (see the module docstring)."""

    decode_step_s: float = 0.05
    train_tokens_per_s: float = 2000.0
    run_overhead_s: float = 40.0
    prompt_tokens: int = 250
    sft_row_tokens: int = 600
    eval_batch: int = 32  # prompts per generation call (pr1lib.evaluation.evaluate.held_out_config)
    decode_rows: int = 64  # rows one decoding loop takes at the assumed step time

    def __str__(self) -> str:
        """The assumptions as one readable line (a notebook prints it, not the raw dataclass).

        >>> print(Rates())  # doctest: +ELLIPSIS
        assumed: 0.05 s per decoding step of 64 rows, 2,000 training tokens/s, 40 s per run, ...
        """
        return (
            f"assumed: {self.decode_step_s:g} s per decoding step of {self.decode_rows} rows, "
            f"{self.train_tokens_per_s:,.0f} training tokens/s, {self.run_overhead_s:g} s per run, "
            f"prompts of {self.prompt_tokens} tokens, SFT rows of {self.sft_row_tokens}, "
            f"{self.eval_batch} prompts per evaluation batch"
        )


T4 = Rates()


def eval_seconds(n: int, k: int, new_tokens: int, tiers: int = 2, rates: Rates = T4) -> float:
    """One held-out evaluation: per tier, the sampled pass (``k`` rows per prompt) and greedy."""
    sampled = math.ceil(n * k / min(rates.decode_rows, rates.eval_batch * k))
    greedy = math.ceil(n / rates.eval_batch)
    return tiers * (sampled + greedy) * new_tokens * rates.decode_step_s


def grpo_seconds(cfg: GRPOStageConfig, evals: int, rates: Rates = T4) -> dict[str, Any]:
    """One GRPO run of ``cfg.max_steps`` steps with ``evals`` held-out evaluations."""
    completions = cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps
    decode = math.ceil(completions / rates.decode_rows) * cfg.max_completion_length
    tokens = completions * (rates.prompt_tokens + cfg.max_completion_length)
    step = decode * rates.decode_step_s + tokens / rates.train_tokens_per_s
    judge = evals * eval_seconds(cfg.eval_n, cfg.eval_k, cfg.eval_max_new_tokens, 2, rates)
    return {
        "steps": cfg.max_steps,
        "completions/step": completions,
        "max tokens": cfg.max_completion_length,
        "s/step": round(step, 1),
        "evaluations": evals,
        "eval s": round(judge),
        "minutes": round((cfg.max_steps * step + judge + rates.run_overhead_s) / 60, 1),
    }


def sft_seconds(cfg: SFTStageConfig, evals: int, rates: Rates = T4) -> dict[str, Any]:
    """One SFT run over ``train_n`` rows for ``num_train_epochs`` (or ``max_steps`` batches)."""
    batch = cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps
    rows = cfg.max_steps * batch if cfg.max_steps > 0 else cfg.train_n * cfg.num_train_epochs
    train = rows * rates.sft_row_tokens / rates.train_tokens_per_s
    judge = evals * eval_seconds(cfg.eval_n, cfg.eval_k, cfg.eval_max_new_tokens, 1, rates)
    return {
        "steps": math.ceil(rows / batch),
        "rows": int(rows),
        "train s": round(train),
        "evaluations": evals,
        "eval s": round(judge),
        "minutes": round((train + judge + rates.run_overhead_s) / 60, 1),
    }


def sft_notebook_plan(profile: str = "colab", rates: Rates = T4) -> dict[str, dict[str, Any]]:
    """Notebook 04's runs: the base evaluated once, then seen and unseen SFT, each evaluated."""
    cfg = SFTStageConfig.for_profile(profile)
    return {
        "SFT seen (and the base's evaluation)": sft_seconds(cfg.replace(variant="seen"), 2, rates),
        "SFT unseen": sft_seconds(cfg.replace(variant="unseen"), 1, rates),
    }


def grpo_notebook_plan(profile: str = "colab", rates: Rates = T4) -> dict[str, dict[str, Any]]:
    """Notebook 06's runs (``notebook=True`` sizes): the seen stages, the plain baseline, the
    unseen Stage-2 study and the reward ablation, with how often each evaluates."""

    def stage(number: int, variant: str, **changes: Any) -> GRPOStageConfig:
        return GRPOStageConfig.for_stage(number, profile, variant=variant, notebook=True, **changes)

    plan = {
        "Stage 2, seen": (stage(2, "seen"), 2),
        "Stage 3, seen": (stage(3, "seen"), 1),
        "plain baseline, Stage 2": (stage(2, "plain"), 2),
        "plain baseline, Stage 3": (stage(3, "plain"), 1),
        "unseen, Stage 3 only": (stage(3, "unseen"), 2),
        "unseen, Stage 2 kept": (stage(2, "unseen"), 2),
        "unseen, then Stage 3": (stage(3, "unseen"), 1),
    }
    for i, (arm, reward) in enumerate(ARMS.items()):
        cfg = stage(3, VARIANT, reward=reward)
        plan[f"ablation arm: {arm}"] = (cfg, 2 if i == 0 else 1)  # the start: evaluated once
    return {name: grpo_seconds(cfg, evals, rates) for name, (cfg, evals) in plan.items()}


def total_minutes(plan: dict[str, dict[str, Any]]) -> float:
    """The plan's minutes, all runs together.

    >>> total_minutes({"a": {"minutes": 1.5}, "b": {"minutes": 2.0}})
    3.5
    """
    return round(sum(run["minutes"] for run in plan.values()), 1)
