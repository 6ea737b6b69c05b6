"""The recipe's tables: variants, rollout modes, prompts, each profile's stage problems and
evaluation sets, the reward of each (variant, stage), clip-high, curricula, per-stage and notebook
presets, graders, verl rewards. A world's own tables live with it (``pr1lib.worlds``), a study's
with the study (``pr1lib.experiments``).

>>> STAGE_REWARDS["seen"], CURRICULA["unseen"], VARIANT_ROLLOUT["unseen"]
({2: 'parallel_correct', 3: 'accuracy'}, (3,), 'forked')
"""

from __future__ import annotations

from typing import Any

from pr1lib import worlds
from pr1lib.config.checks import register_choices
from pr1lib.format.prompts import PROMPT_STYLES

VARIANTS = ("seen", "unseen", "plain")
PARALLEL_VARIANTS = ("seen", "unseen")  # the two that learn blocks in a cold-start SFT
# seen: one causal stream | forked: paths forked from the prefix cache, merged as the unseen mask
# sees them | reread: paths forked, then re-read in order before the summary (the paper's rollout)
ROLLOUT_MODES = ("seen", "forked", "reread")
# How each variant rolls out, in RL and in evaluation (docs/recipe.md#6-the-rollout-engine): the
# paper samples the paths of both variants independently; the summary reads them as the variant
# trains (unseen: forked, merged with restarted positions; seen: re-read causally, in order); the
# plain baseline samples one stream and never opens a block.
VARIANT_ROLLOUT = {"seen": "reread", "unseen": "forked", "plain": "seen"}
# The prompt a variant is trained and evaluated with, per profile: the parallel variants use the
# paper's v3 prompt (the tiny model: its own plain prompt), the plain one the baseline prompt.
PROMPTS: dict[str, dict[str, str]] = {
    "smoke": {"seen": "tiny", "unseen": "tiny", "plain": "tiny"},
    "tiny": {"seen": "tiny", "unseen": "tiny", "plain": "tiny"},
    "colab": {"seen": "v3", "unseen": "v3", "plain": "baseline"},
    "paper": {"seen": "v3", "unseen": "v3", "plain": "baseline"},
}
STAGES = (2, 3)  # the RL stages: 2 = easy problems (GSM8K), 3 = hard ones (DAPO)
TIERS = ("easy", "hard")
# the values these fields may take, checked in every config (pr1lib.config.checks.check_fields)
register_choices(
    variant=VARIANTS,
    mode=ROLLOUT_MODES,
    eval_mode=ROLLOUT_MODES,
    rollout=(*ROLLOUT_MODES, "trl"),
    world=worlds.names,  # a function: a world registered later counts too
    prompt_style=tuple(PROMPT_STYLES),
    # transformers' schedulers that need nothing but warm-up and length (reduce_lr_on_plateau and
    # greedy need an evaluation metric, the *_min_lr ones and warmup_stable_decay more kwargs)
    lr_scheduler_type=(
        "linear",
        "cosine",
        "cosine_with_restarts",
        "polynomial",
        "constant",
        "constant_with_warmup",
        "inverse_sqrt",
    ),
    # TRL's GRPO losses (GRPOConfig.loss_type) and reward scalings (GRPOConfig.scale_rewards)
    loss_type=("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"),
    scale_rewards=("group", "batch", "none"),
    at_block_limit=("stop", "mask"),
    llm_teacher=("standin", "hf"),
)


# ----------------------------------------------------------------------------- the recipe's tables
# Problems of each RL stage per profile: easy first (the paper's GSM8K stage), then hard (DAPO).
STAGE_SOURCES: dict[str, dict[int, str]] = {
    "smoke": {2: "tinygsm-easy", 3: "tinygsm-hard"},
    "tiny": {2: "tinygsm-easy", 3: "tinygsm-hard"},
    "colab": {2: "gsm8k", 3: "dapo"},
    "paper": {2: "gsm8k", 3: "dapo"},
}
# Held-out evaluation sets per profile (pr1lib.data.evalsets names), never seen in training.
EVAL_SETS: dict[str, dict[str, str]] = {
    "smoke": {"easy": "tinygsm-easy", "hard": "tinygsm-hard"},
    "tiny": {"easy": "tinygsm-easy", "hard": "tinygsm-hard"},
    "colab": {"easy": "gsm8k", "hard": "math500-int"},
    "paper": {"easy": "gsm8k", "hard": "math500-int"},
}
# The paper's stage recipe per variant (docs/recipe.md#9-the-stage-recipe-per-variant): (variant,
# stage) -> reward mode. Seen: Stage 2 parallel-and-correct on easy problems, Stage 3 accuracy on
# hard ones. Unseen skips Stage 2 and runs Stage 3 as S1 (accuracy) or S2 (alternating: the
# default here); Stage 2 runs only when a study puts it back. Plain: accuracy on the same data and
# steps as seen (the paper's "GRPO + RL on GSM8K" row of Table 2).
STAGE_REWARDS: dict[str, dict[int, str]] = {
    "seen": {2: "parallel_correct", 3: "accuracy"},
    "unseen": {2: "parallel_correct", 3: "alternating"},
    "plain": {2: "accuracy", 3: "accuracy"},
}
# Clip-high paired with a reward, as the paper's S2 script pairs 0.28 with the alternating reward
# (S1 and S2 are reward schemes, not stages: docs/recipe.md#7-rewards); other rewards clip at
# epsilon. ``GRPOStageConfig.for_stage`` takes the reward's pair unless epsilon_high is given.
CLIP_HIGH: dict[str, float] = {"alternating": 0.28}
CURRICULA: dict[str, tuple[int, ...]] = {"seen": (2, 3), "unseen": (3,), "plain": (2, 3)}
# Per-stage overrides on top of the profile: Stage 2 is short (the paper: 35 steps vs 300).
STAGE_PRESETS: dict[int, dict[str, dict[str, Any]]] = {
    2: {
        "smoke": dict(max_steps=3),
        "tiny": dict(max_steps=15),
        "colab": dict(max_steps=40),
        "paper": dict(max_steps=35),
    },
    3: {},
}
# Notebook 06 (notebook=True): on tiny, smaller batches and a shorter Stage 3 keep `make tour`
# short; on colab, every run of the notebook fits one T4 hour (pr1lib.notebook.budget shows the
# arithmetic).
COLAB_NOTEBOOK = dict(
    per_device_train_batch_size=16,
    gradient_accumulation_steps=1,
    max_completion_length=384,
    max_path_length=160,
    eval_n=16,
    eval_k=2,
    eval_max_new_tokens=384,
    save_steps=2,
)
NOTEBOOK_PRESETS: dict[int, dict[str, dict[str, Any]]] = {
    2: {"tiny": dict(per_device_train_batch_size=32), "colab": dict(COLAB_NOTEBOOK, max_steps=4)},
    3: {
        "tiny": dict(per_device_train_batch_size=32, max_steps=30),
        "colab": dict(COLAB_NOTEBOOK, max_steps=6),
    },
}
# The grader (pr1lib.rewards.graders.GRADERS) that decides correctness and tag validity in each
# stage, unless the stage's config names one (GRPOStageConfig.grader / EvalConfig.grader). RL keeps
# this project's grader, whose strict grammar the reward values are defined with; evaluation reports
# the official answer check as ``accuracy`` (the paper's numbers) and both graders in the summary.
DEFAULT_GRADERS = {"stage2": "project", "stage3": "project", "eval": "official"}
# verl export: the reward of each RL set (Stage 2 on GSM8K; Stage 3 on DAPO; TinyGSM either).
VERL_REWARDS: dict[str, str] = {
    "gsm8k": "parallel_correct",
    "dapo": "alternating",
    "tinygsm-easy": "alternating",
    "tinygsm-hard": "alternating",
}

# Table 2's checkpoints: stage key -> the variant it was trained as (which decides how it is rolled
# out and prompted in evaluation) and the run folders that may hold it (under runs_dir(), first
# wins). "grpo-gsm8k" is the plain GRPO baseline on the same data and steps (easy, then hard).
STAGE_RUNS: dict[str, tuple[str, tuple[str, ...]]] = {
    "base": ("seen", ()),
    "sft-seen": ("seen", ("sft-{p}-seen", "04_sft_lora-{p}/seen")),
    "sft-unseen": ("unseen", ("sft-{p}-unseen", "04_sft_lora-{p}/unseen")),
    "grpo-gsm8k": (
        "plain",
        (
            "06_grpo_training-{p}/plain/grpo-{p}-plain-s3-accuracy-seed{s}",
            "grpo-{p}-plain-s3-accuracy-seed{s}",
            "grpo-curriculum-{p}/seed{s}/grpo-{p}-plain-s3-accuracy-seed{s}",
        ),
    ),
    "rl-seen": (
        "seen",
        (
            "06_grpo_training-{p}/stage3",
            "grpo-{p}-seen-s3-accuracy-seed{s}",
            "grpo-curriculum-{p}/seed{s}/grpo-{p}-seen-s3-accuracy-seed{s}",
        ),
    ),
    "rl-unseen-s1": (
        "unseen",
        ("grpo-{p}-unseen-s3-accuracy-seed{s}", "grpo-ablation-{p}-unseen-seed{s}/accuracy"),
    ),
    "rl-unseen-s2": (
        "unseen",
        (
            "grpo-{p}-unseen-s3-alternating-seed{s}",
            "grpo-unseen-stage2-{p}-seed{s}/direct/grpo-{p}-unseen-s3-alternating-seed{s}",
            "grpo-ablation-{p}-unseen-seed{s}/alternating",
        ),
    ),
}
