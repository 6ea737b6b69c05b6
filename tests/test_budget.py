"""pr1lib.notebook.budget: the computed T4 time of the colab notebooks, and the arithmetic behind
it.

Run: .venv/bin/python -m pytest tests/test_budget.py -q -p no:cacheprovider
"""

from __future__ import annotations

import pytest

from pr1lib.config import GRPOStageConfig, SFTStageConfig
from pr1lib.notebook import budget


@pytest.mark.parametrize(
    "plan",
    [budget.sft_notebook_plan, budget.grpo_notebook_plan],
    ids=["04_sft_lora", "06_grpo_training"],
)
def test_each_colab_notebook_fits_one_t4_hour(plan):
    assert 0 < budget.total_minutes(plan("colab")) <= 60


def test_the_colab_command_line_stage_3_would_not_fit_in_a_notebook():
    full = budget.grpo_seconds(GRPOStageConfig.for_stage(3, "colab"), evals=2)
    assert full["steps"] == 100 and full["minutes"] > 60  # why notebook=True shrinks it


def test_grpo_arithmetic_on_a_hand_computed_case():
    rates = budget.Rates(
        decode_step_s=0.1,
        train_tokens_per_s=1000.0,
        run_overhead_s=60.0,
        prompt_tokens=100,
        decode_rows=64,
        eval_batch=32,
    )
    cfg = GRPOStageConfig.for_stage(
        3,
        "smoke",
        per_device_train_batch_size=16,
        max_completion_length=400,
        max_steps=10,
        eval_n=8,
        eval_k=2,
        eval_max_new_tokens=200,
    )
    run = budget.grpo_seconds(cfg, evals=1, rates=rates)
    # step: 400 decode steps x 0.1 s + 16 x (100 + 400) tokens / 1000 per s = 40 + 8 = 48 s
    # evaluation: 2 tiers x (1 sampled + 1 greedy call) x 200 steps x 0.1 s = 80 s
    assert run["s/step"] == 48.0 and run["eval s"] == 80
    assert run["minutes"] == round((10 * 48 + 80 + 60) / 60, 1)


def test_sft_arithmetic_counts_rows_epochs_and_evaluations():
    rates = budget.Rates(
        train_tokens_per_s=1000.0, sft_row_tokens=500, run_overhead_s=0.0, decode_step_s=0.1
    )
    cfg = SFTStageConfig.for_profile(
        "colab", train_n=400, num_train_epochs=2.0, eval_n=32, eval_k=2, eval_max_new_tokens=100
    )
    run = budget.sft_seconds(cfg, evals=1, rates=rates)
    assert run["rows"] == 800 and run["train s"] == 400  # 800 rows x 500 tokens / 1000 per s
    assert run["eval s"] == 20  # 1 tier x (1 sampled call of 64 rows + 1 greedy) x 100 x 0.1 s
