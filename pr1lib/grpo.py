"""Stages 2-3: GRPO with TRL's ``GRPOTrainer``, the paper's rewards and the parallel rollout engine.

The wiring, piece by piece (reference/paper-spec.md §4, §11):

* **prompts**: a ``Dataset`` with ``prompt`` (the text the model sees) and ``answer`` (the gold
  value, which TRL hands to every reward function as a keyword argument);
* **rewards**: ``pr1lib.rewards.reward_for(cfg.reward)`` wrapped in ``Tracked``, which also logs
  what the dashboard plots (accuracy, parallel ratio, validity, block position, every reward
  mode's score) through TRL's ``log_metric``; extra terms go in with TRL's ``reward_weights``;
* **rollouts**: ``EngineRollout``, a TRL ``rollout_func`` over ``pr1lib.rollout.generate``
  (``forked``: every ``<Parallel>`` opens real independent paths; ``seen``: plain sampling), or
  TRL's own ``model.generate`` (``rollout="trl"``);
* **log-probs**: ``ParallelGRPOTrainer`` overrides the one method all of TRL's log-prob calls go
  through. ``seen`` keeps TRL's causal forward; ``unseen`` adds the path-isolating 4D mask and the
  restarted positions of ``pr1lib.structure`` (labels come from the 2D mask, as the 4D one hides
  the padding);
* **knobs**: ``GRPOStageConfig`` (group 8, clip 0.2 / 0.28 high for the alternating S2 run, no KL,
  T = 1.0) becomes TRL's ``GRPOConfig``, seeds fixed (``seed`` and ``data_seed``);
* **checkpoints**: every ``save_steps`` into ``RUN/trainer/checkpoint-N``; a rerun of the same
  command resumes from the last one (optimizer, scheduler, RNG and data position restored), and a
  ``GRPOSession`` runs N more steps at a time the same way (the control panel's button).

A run folder holds ``config.json``, ``model_config.json``, ``metrics.csv`` (the dashboard's
series), ``trainer/`` (checkpoints), ``adapter/`` and ``merged/`` (the next stage's start) and
``run_card.json``.

>>> stage_source(2, "tiny"), stage_source(3, "paper")
('tinygsm-easy', 'dapo')
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from pr1lib.config import (GRPOStageConfig, ModelConfig, RolloutConfig, check_profile, environment_report,
                           is_main_process, runs_dir, set_seed)
from pr1lib.graders import GRADERS, default_grader
from pr1lib.rewards import MODES, reward_for, terms
from pr1lib.sft import expose_head_bias

VARIANTS = ("seen", "unseen")
REWARD_MODES = (*MODES, "alternating")
ROLLOUTS = ("forked", "seen", "trl")
# Stage -> problem source per profile: easy first (the paper's GSM8K stage), then hard (DAPO).
STAGE_SOURCES = {"smoke": {2: "tinygsm-easy", 3: "tinygsm-hard"}, "tiny": {2: "tinygsm-easy", 3: "tinygsm-hard"},
                 "colab": {2: "gsm8k", 3: "dapo"}, "paper": {2: "gsm8k", 3: "dapo"}}
# The paper's default reward per stage (§4.5): Seen Stage 2 = parallel AND correct; Stage 3 = S2.
STAGE_REWARDS = {2: "parallel_correct", 3: "alternating"}
# Stage 2 is short (the paper: 35 steps, against 300 for Stage 3); per profile.
STAGE2_STEPS = {"smoke": 3, "tiny": 15, "colab": 40, "paper": 35}
PAPER_TABLE4 = [  # Table 4 (Unseen, from Parallel-SFT-Unseen): reward -> parallel ratio %, Avg score
    {"reward": "accuracy", "paper_parallel_ratio": 13.6, "paper_avg": 47.1},
    {"reward": "alternating", "paper_parallel_ratio": 63.0, "paper_avg": 46.8},
    {"reward": "structure", "paper_parallel_ratio": 80.3, "paper_avg": 43.5},
]


# ----------------------------------------------------------------------------- config
def stage_source(stage: int, profile: str | None = None) -> str:
    """The problem source of ``stage`` (2 = easy, 3 = hard) for a profile."""
    if stage not in (2, 3):
        raise ValueError(f"stage must be 2 (easy) or 3 (hard), got {stage!r}")
    return STAGE_SOURCES[check_profile(profile)][stage]


def stage_config(stage: int, profile: str | None = None, **overrides: Any) -> GRPOStageConfig:
    """The profile's config for ``stage`` with the paper's stage reward (and Stage 2's shorter
    length), then ``overrides``.

    >>> stage_config(2, "smoke").reward, stage_config(3, "smoke", reward="accuracy").reward
    ('parallel_correct', 'accuracy')
    >>> stage_config(2, "paper").max_steps, stage_config(3, "paper").max_steps
    (35, 300)
    """
    defaults: dict[str, Any] = {"stage": stage, "reward": STAGE_REWARDS[stage]}
    if stage == 2:
        defaults["max_steps"] = STAGE2_STEPS[check_profile(profile)]
    cfg = GRPOStageConfig.for_profile(profile, **{**defaults, **overrides})
    check_config(cfg)
    return cfg


def check_config(cfg: GRPOStageConfig) -> None:
    """Refuse unknown modes and batch sizes TRL would reject later, with a message that says why."""
    for name, value, allowed in (("reward", cfg.reward, REWARD_MODES), ("variant", cfg.variant, VARIANTS),
                                 ("rollout", cfg.rollout_mode, ROLLOUTS),
                                 ("grader", cfg.grader or default_grader(cfg.stage), tuple(GRADERS))):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    if cfg.per_device_train_batch_size % cfg.num_generations:
        raise ValueError(f"per_device_train_batch_size={cfg.per_device_train_batch_size} counts completions: "
                         f"it must be a multiple of num_generations={cfg.num_generations}")
    if cfg.variant == "unseen" and cfg.rollout_mode != "forked":
        raise ValueError("the unseen variant trains on paths that never saw each other: use rollout='forked'")


def clip_high(cfg: GRPOStageConfig) -> float:
    """``epsilon_high``: as set, else 0.28 for the alternating reward (the S2 script), else ``epsilon``.

    >>> clip_high(GRPOStageConfig(reward="alternating")), clip_high(GRPOStageConfig(reward="accuracy"))
    (0.28, 0.2)
    """
    if cfg.epsilon_high is not None:
        return cfg.epsilon_high
    return 0.28 if cfg.reward == "alternating" else cfg.epsilon


def model_config(cfg: GRPOStageConfig, profile: str | None = None, init: str | Path | None = None) -> ModelConfig:
    """The profile's ``ModelConfig``, loaded from ``init`` (a run folder's ``merged/``) when given.

    >>> model_config(GRPOStageConfig(), "smoke", "runs/sft").name.endswith("runs/sft/merged")
    True
    """
    base = ModelConfig.for_profile(profile)
    if init is not None:
        folder = Path(init)
        folder = folder / "merged" if (folder / "merged").is_dir() or not (folder / "config.json").exists() else folder
        base = base.replace(name=str(folder), random_init=False)
    four_bit = base.load_in_4bit if cfg.load_in_4bit is None else cfg.load_in_4bit
    ckpt = torch.cuda.is_available() if cfg.gradient_checkpointing is None else cfg.gradient_checkpointing
    return base.replace(use_lora=cfg.use_lora, lora_r=cfg.lora_r, lora_alpha=cfg.lora_alpha, load_in_4bit=four_bit,
                        gradient_checkpointing=ckpt, seed=cfg.seed)


def trl_args(cfg: GRPOStageConfig, out_dir: str | Path, model_cfg: ModelConfig) -> GRPOConfig:
    """TRL's ``GRPOConfig`` from the stage config (one generation per optimizer step)."""
    cuda = torch.cuda.is_available()
    return GRPOConfig(
        output_dir=str(out_dir), learning_rate=cfg.learning_rate, lr_scheduler_type=cfg.lr_scheduler_type,
        warmup_steps=cfg.warmup_steps, weight_decay=cfg.weight_decay, max_grad_norm=cfg.max_grad_norm,
        max_steps=cfg.max_steps, per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps, num_generations=cfg.num_generations,
        max_completion_length=cfg.max_completion_length, temperature=cfg.temperature, top_p=cfg.top_p,
        epsilon=cfg.epsilon, epsilon_high=clip_high(cfg), beta=cfg.beta, loss_type=cfg.loss_type,
        scale_rewards=cfg.scale_rewards, reward_weights=reward_weights(cfg), seed=cfg.seed, data_seed=cfg.seed,
        save_strategy="steps", save_steps=cfg.save_steps, save_only_model=False, logging_steps=cfg.logging_steps,
        report_to="none", disable_tqdm=True, use_cpu=not cuda,
        activation_checkpointing=model_cfg.gradient_checkpointing,
        bf16=cuda and model_cfg.dtype == "bfloat16", fp16=cuda and model_cfg.dtype == "float16",
        log_completions=False, shuffle_dataset=True,
    )


# ----------------------------------------------------------------------------- data
def prompt_dataset(cfg: GRPOStageConfig, tokenizer: Any, prompt_style: str, profile: str | None = None):
    """``Dataset[prompt, answer, data_source]`` of the stage's training problems (``cfg.data`` or the
    stage's source); TRL passes ``data_source`` to the rewards, which the official grader reads."""
    from datasets import Dataset

    from pr1lib.data import load_source
    from pr1lib.prompts import chat_prompt

    records = load_source(cfg.data or stage_source(cfg.stage, profile), "train", cfg.train_n, seed=cfg.seed)
    return Dataset.from_dict({"prompt": [chat_prompt(r["question"], tokenizer, prompt_style) for r in records],
                              "answer": [str(r["answer"]) for r in records],
                              "data_source": [str(r.get("source", "")) for r in records]})


# Held-out evaluation sets per profile: "easy" and "hard" (pr1lib.benchmarks names).
EVAL_SETS = {"smoke": {"easy": "tinygsm-easy", "hard": "tinygsm-hard"},
             "tiny": {"easy": "tinygsm-easy", "hard": "tinygsm-hard"},
             "colab": {"easy": "gsm8k", "hard": "math500"}, "paper": {"easy": "gsm8k", "hard": "math500"}}


def held_out(cfg: GRPOStageConfig, tier: str, profile: str | None = None) -> list[dict]:
    """The first ``cfg.eval_n`` problems of the profile's held-out ``easy`` or ``hard`` set
    (TinyGSM test splits on the CPU profiles, never seen in training). The set does not depend on
    the training seed, so runs with different seeds are scored on the same problems.

    >>> [r["source"] for r in held_out(GRPOStageConfig(eval_n=1), "hard", "tiny")]
    ['tinygsm-hard']
    """
    from pr1lib.benchmarks import load_benchmark

    return load_benchmark(EVAL_SETS[check_profile(profile)][tier], cfg.eval_n, seed=0)


# ----------------------------------------------------------------------------- rewards
def batch_metrics(completions: Sequence[Any], answer: Sequence[Any], grader: str = "project",
                  sources: Sequence[Any] | None = None) -> dict[str, float]:
    """What the dashboard plots for one batch, parsed exactly as the rewards parse it (same grader).

    >>> block = "<Parallel><Path>a</Path><Path>b</Path></Parallel>\\n<Summary>s</Summary>\\n"
    >>> m = batch_metrics([block + "Final Answer: 2", "Final Answer: 3"], ["2", "2"])
    >>> m["accuracy"], m["parallel_ratio"], m["valid_ratio"], m["term/tiered"]
    (0.5, 0.5, 1.0, 0.1)
    """
    from pr1lib.format import parallel_stats
    from pr1lib.rewards import completion_text, score_terms

    sources = sources if sources is not None else [None] * len(completions)
    parsed = [terms(c, a, grader, src) for c, a, src in zip(completions, answer, sources)]
    n = max(len(parsed), 1)
    out = {"accuracy": sum(t.correct for t in parsed) / n, "parallel_ratio": sum(t.blocks > 0 for t in parsed) / n,
           "valid_ratio": sum(t.valid for t in parsed) / n}
    positions = [parallel_stats(completion_text(c))["first_block_position"] for c in completions]
    positions = [p for p in positions if p is not None]
    if positions:
        out["block_position"] = statistics.fmean(positions)
    for mode in MODES:
        out[f"term/{mode}"] = round(sum(score_terms(t, mode) for t in parsed) / n, 6)
    return out


class Tracked:
    """A TRL reward function that scores with ``reward`` and logs ``batch_metrics`` via ``log_metric``."""

    def __init__(self, reward: Callable, grader: str = "project") -> None:
        self.reward, self.grader = reward, grader
        self.__name__ = getattr(reward, "__name__", "reward")  # TRL's column name: rewards/<name>/mean
        self.reward_range = getattr(reward, "reward_range", None)

    def range_at(self, global_step: int = 0):
        from pr1lib.rewards import reward_range

        return reward_range(self.reward, global_step)

    def __call__(self, completions: list, answer: list, log_metric: Callable | None = None, **kwargs: Any) -> list:
        if log_metric is not None:
            sources = kwargs.get("data_source")
            sources = sources if isinstance(sources, list) and len(sources) == len(completions) else None
            for name, value in batch_metrics(completions, answer, self.grader, sources).items():
                log_metric(name, value)
        return self.reward(completions=completions, answer=answer, log_metric=log_metric, **kwargs)


def reward_funcs(cfg: GRPOStageConfig) -> list[Callable]:
    """The main reward (tracked) followed by the extra terms, in ``reward_weights`` order, all under
    the config's grader (``None``: the stage's default in ``pr1lib.config.DEFAULT_GRADERS``)."""
    grader = cfg.grader or default_grader(cfg.stage)  # pr1lib.config.DEFAULT_GRADERS
    main = Tracked(reward_for(cfg.reward, cfg.window, cfg.parallel_steps, grader), grader)
    return [main, *(reward_for(mode, grader=grader) for mode, _ in cfg.extra_rewards)]


def reward_weights(cfg: GRPOStageConfig) -> list[float]:
    """TRL's ``reward_weights``: the main reward's weight, then each extra term's.

    >>> reward_weights(GRPOStageConfig(extra_rewards=(("structure", 0.2),)))
    [1.0, 0.2]
    """
    return [float(cfg.reward_weight), *(float(w) for _, w in cfg.extra_rewards)]


# ----------------------------------------------------------------------------- rollouts
class EngineRollout:
    """TRL ``rollout_func``: ``(prompts, trainer) -> {prompt_ids, completion_ids, logprobs[, env_mask]}``.

    Samples with ``pr1lib.rollout.generate`` from the live policy (no gradients, eval mode), with the
    global torch RNG, which the trainer seeds and restores on resume. With ``train_forced_tokens``
    every token gets loss (the official choice); otherwise ``env_mask`` keeps the engine's tags out.
    """

    def __init__(self, cfg: GRPOStageConfig, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.train_forced = cfg.train_forced_tokens
        self.config = RolloutConfig(mode=cfg.rollout_mode, num_paths=cfg.num_paths, max_blocks=cfg.max_blocks,
                                    max_completion_length=cfg.max_completion_length,
                                    max_path_length=cfg.max_path_length, temperature=cfg.temperature,
                                    top_p=cfg.top_p)
        self.seconds = 0.0

    def __call__(self, prompts: list, trainer: Any) -> dict[str, list]:
        from pr1lib.rollout import as_columns, generate

        model = trainer.accelerator.unwrap_model(trainer.model)
        was_training, start = model.training, time.perf_counter()
        model.eval()
        try:
            rollouts = generate(model, self.tokenizer, prompts, self.config)
        finally:
            model.train(was_training)
        self.seconds += time.perf_counter() - start
        columns = as_columns(rollouts)
        columns.pop("text")
        if self.train_forced:
            columns.pop("env_mask")
        return columns


# ----------------------------------------------------------------------------- the trainer
class ParallelGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose log-prob forward sees the parallel structure when ``variant="unseen"``.

    TRL calls ``_get_per_token_logps_and_entropies`` for the old, reference and current log-probs,
    so this one override makes every one of them path-isolated. ``seen`` is TRL's own forward.
    """

    def __init__(self, *args: Any, variant: str = "seen", **kwargs: Any) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        self.variant = variant
        super().__init__(*args, **kwargs)
        expose_head_bias(self.model)  # the same PEFT/TRL shim as the SFT stage

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep,
                                           batch_size=None, compute_entropy=False, compute_aux_loss=False,
                                           **kwargs):
        if self.variant == "seen":
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
                **kwargs)
        batch_size = batch_size or input_ids.size(0)
        logps, entropies = [], []
        for start in range(0, input_ids.size(0), batch_size):
            ids, mask2d = input_ids[start:start + batch_size], attention_mask[start:start + batch_size]  # (b, L)
            lp, ent = self._unseen_forward(model, ids, mask2d, logits_to_keep)
            logps.append(lp)
            entropies.append(ent)
        entropy = torch.cat(entropies) if compute_entropy else None
        return torch.cat(logps), entropy, None

    def _unseen_forward(self, model, ids: torch.Tensor, mask2d: torch.Tensor, logits_to_keep: int):
        """Log-probs and entropies ``(b, logits_to_keep)`` under the unseen mask and positions."""
        from pr1lib.structure import attention_inputs

        start = torch.full((ids.size(0),), ids.size(1) - logits_to_keep)  # prompts are left-padded to one width
        attn = getattr(model.config, "_attn_implementation", None) or "sdpa"
        extra = attention_inputs(ids, self.processing_class, "unseen", start, attn, padding_mask=mask2d.bool(),
                                 dtype=model.dtype)  # eager's additive mask takes the compute dtype
        labels = ids.masked_fill(mask2d == 0, -100)  # (b, L) from the 2D mask: the 4D one hides padding
        labels[:, :-logits_to_keep] = -100
        with self.accelerator.autocast():
            out = model(input_ids=ids, labels=labels, fused_lm_head=True, **extra)
        return out.log_probs[:, -logits_to_keep:], out.entropy[:, -logits_to_keep:]


def load_policy(cfg: GRPOStageConfig, model_cfg: ModelConfig):
    """``(model, tokenizer, peft_config | None)``: the start checkpoint with the tags (added and
    initialised when it lacks them), 4-bit when asked, LoRA (+ tag rows) when ``use_lora``."""
    from pr1lib.sft import load_sft_policy

    return load_sft_policy(model_cfg, cfg.train_tag_rows)


def build_trainer(cfg: GRPOStageConfig, model: Any, tokenizer: Any, peft_config: Any, dataset: Any,
                  out_dir: str | Path, model_cfg: ModelConfig, callbacks: Sequence[TrainerCallback] = (),
                  rewards: Sequence[Callable] | None = None) -> ParallelGRPOTrainer:
    """The trainer: TRL's generation for ``rollout="trl"``, else ``EngineRollout``."""
    from transformers import PrinterCallback

    from pr1lib.sft import keep_4bit_differentiable

    check_config(cfg)
    keep_4bit_differentiable(model)
    rollout = None if cfg.rollout_mode == "trl" else EngineRollout(cfg, tokenizer)
    trainer = ParallelGRPOTrainer(
        model=model, reward_funcs=list(rewards or reward_funcs(cfg)), args=trl_args(cfg, out_dir, model_cfg),
        train_dataset=dataset, processing_class=tokenizer, peft_config=peft_config, callbacks=list(callbacks),
        rollout_func=rollout, variant=cfg.variant,
    )
    trainer.remove_callback(PrinterCallback)  # the dashboard (or the CLI's one line per step) reports instead
    return trainer


def last_checkpoint(folder: str | Path) -> Path | None:
    """The ``checkpoint-N`` with the largest N under ``folder`` (``None`` if there is none)."""
    folder = Path(folder)
    found = [p for p in folder.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()]
    return max(found, key=lambda p: int(p.name.split("-")[-1])) if found else None


class StopAt(TrainerCallback):
    """Stop training after ``step`` (and save there): how a test simulates a Colab disconnect."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= self.step:
            control.should_save = True
            control.should_training_stop = True
        return control


class SaveAtEnd(TrainerCallback):
    """Save a checkpoint on the last step too, so the next ``GRPOSession.run`` resumes exactly there."""

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= state.max_steps:
            control.should_save = True
        return control


# ----------------------------------------------------------------------------- evaluation
def evaluate(model: Any, tokenizer: Any, cfg: GRPOStageConfig, model_cfg: ModelConfig, profile: str | None,
             tiers: Sequence[str] = ("easy", "hard")) -> tuple[dict[str, dict], dict[str, list]]:
    """Greedy held-out metrics per tier (``pr1lib.sft.evaluate_policy``, the rollout engine) and samples."""
    from pr1lib.sft import evaluate_policy

    metrics, samples = {}, {}
    for tier in tiers:
        metrics[tier], samples[tier] = evaluate_policy(model, tokenizer, held_out(cfg, tier, profile),
                                                       model_cfg.prompt_style, profile, cfg.eval_rollout_mode,
                                                       cfg.eval_max_new_tokens)
    return metrics, samples


def train_summary(rows: Sequence[dict], last: int = 10) -> dict[str, float]:
    """Means of the sampled (T = 1) training metrics over the last ``last`` logged steps.

    >>> train_summary([{"step": 1, "parallel_ratio": 0.0}, {"step": 2, "parallel_ratio": 0.5}], last=1)
    {'parallel_ratio': 0.5}
    """
    keys = ("reward", "accuracy", "parallel_ratio", "valid_ratio", "block_position", "completions/mean_length")
    tail = list(rows)[-last:]
    out = {}
    for key in keys:
        values = [r[key] for r in tail if r.get(key) is not None and not math.isnan(r[key])]
        if values:
            out[key] = round(statistics.fmean(values), 4)
    return out


# ----------------------------------------------------------------------------- a run, N steps at a time
def run_name(cfg: GRPOStageConfig, profile: str) -> str:
    """``grpo-<profile>-<variant>-s<stage>-<reward>-seed<seed>``.

    >>> run_name(GRPOStageConfig(stage=2, reward="tiered"), "tiny")
    'grpo-tiny-seen-s2-tiered-seed0'
    """
    return f"grpo-{profile}-{cfg.variant}-s{cfg.stage}-{cfg.reward}-seed{cfg.seed}"


def start_id(init: str | Path | None) -> str:
    """Which checkpoint a run starts from: its path plus a digest of its weight files' sizes and
    times, so a folder retrained in place counts as another start (caches keyed by path alone
    reused results of the old model).

    >>> start_id(None), start_id("Qwen/Qwen3-4B-Base")
    ('base', 'Qwen/Qwen3-4B-Base')
    """
    if init is None:
        return "base"
    folder = Path(init) / "merged"
    files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    stamp = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    return f"{init}#{hashlib.sha256(repr(stamp).encode()).hexdigest()[:8]}" if stamp else str(init)


def is_run_folder(init: str | Path | None) -> bool:
    """True when ``init`` is a finished run folder (it holds ``merged/``), not a hub id or the base."""
    return init is not None and (Path(init) / "merged").is_dir()


def move_aside(run_dir: Path, why: str) -> None:
    """Rename ``run_dir`` to ``<name>.prev`` (replacing an older one) so a new run starts clean."""
    if not (run_dir.exists() and is_main_process()):
        return
    prev = run_dir.with_name(run_dir.name + ".prev")
    shutil.rmtree(prev, ignore_errors=True)
    run_dir.rename(prev)
    print(f"note: moved {run_dir} to {prev}: {why}", flush=True)


def claim_run_dir(run_dir: Path, init: str | Path | None) -> None:
    """Mark ``run_dir`` as begun from ``init``; a folder begun from another start (or holding
    checkpoints from before these marks) is moved to ``<name>.prev`` first: resuming it would
    continue someone else's run."""
    marker, sid = run_dir / "start.json", start_id(init)
    theirs = json.loads(marker.read_text())["start"] if marker.exists() else None
    stale = theirs != sid if theirs is not None else last_checkpoint(run_dir / "trainer") is not None
    if stale:
        move_aside(run_dir, f"it was begun from another start ({theirs or 'unknown'})")
    run_dir.mkdir(parents=True, exist_ok=True)
    if is_main_process():
        marker.write_text(json.dumps({"start": sid}))


class GRPOSession:
    """One GRPO run folder, trained N steps at a time; every ``run`` resumes from the last checkpoint.

    ``run(steps)`` builds a fresh trainer from the current config (so a changed reward mode or
    window applies from the next step on), resumes from ``RUN/trainer/checkpoint-*`` (optimizer,
    scheduler, RNG, data position and step count) and saves a checkpoint when it stops, so two
    runs of 2 steps end with the same weights as one run of 4. After a disconnect, a new session on
    the same folder picks up where the last checkpoint left off.

    ``policy`` is a ready ``(model, tokenizer, peft_config)`` (tests reuse one base model);
    ``rewards`` replaces the config's reward functions (tests use one with guaranteed variance).
    """

    def __init__(self, cfg: GRPOStageConfig, profile: str | None = None, init: str | Path | None = None,
                 out: str | Path | None = None, callbacks: Sequence[TrainerCallback] = (),
                 model_cfg: ModelConfig | None = None, dashboard: Any = None, policy: tuple | None = None,
                 rewards: Sequence[Callable] | None = None) -> None:
        from pr1lib.dashboard import Dashboard

        check_config(cfg)
        self.profile, self.cfg, self.init = check_profile(profile), cfg, init
        self.run_dir = Path(out or runs_dir() / run_name(cfg, self.profile))
        claim_run_dir(self.run_dir, init)
        self.model_cfg = model_cfg or model_config(cfg, self.profile, init)
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        set_seed(cfg.seed)
        self.model, self.tokenizer, self.peft_config = policy or load_policy(cfg, self.model_cfg)
        self.rewards = rewards  # None: reward_funcs(cfg), rebuilt at every run (the mode may change)
        self.dataset = prompt_dataset(cfg, self.tokenizer, self.model_cfg.prompt_style, self.profile)
        self.dashboard = dashboard or Dashboard(self.run_dir / "metrics.csv", live=False)
        self.callbacks = [self.dashboard, *callbacks]
        self.trainer: ParallelGRPOTrainer | None = None
        self.train_seconds, self.started = 0.0, time.perf_counter()

    @property
    def step(self) -> int:
        """Optimizer steps done so far (from the trainer, else the last checkpoint)."""
        if self.trainer is not None:
            return self.trainer.state.global_step
        ckpt = last_checkpoint(self.run_dir / "trainer")
        return int(ckpt.name.split("-")[-1]) if ckpt else 0

    def run(self, steps: int | None = None, callbacks: Sequence[TrainerCallback] = (), **changes: Any) -> int:
        """Train ``steps`` more steps (default: up to ``cfg.max_steps``); ``changes`` update the config
        first (e.g. ``reward="structure"``). Returns the step reached."""
        self.cfg = self.cfg.replace(**changes) if changes else self.cfg
        done = self.step
        cfg = self.cfg.replace(max_steps=done + steps if steps is not None else self.cfg.max_steps)
        if is_main_process():
            self.cfg.save(self.run_dir / "config.json")
            self.model_cfg.save(self.run_dir / "model_config.json")
        first = self.trainer is None
        model = self.model if first else self.trainer.model
        self.trainer = build_trainer(cfg, model, self.tokenizer, self.peft_config if first else None, self.dataset,
                                     self.run_dir / "trainer", self.model_cfg,
                                     [*self.callbacks, *callbacks, SaveAtEnd()], self.rewards)
        ckpt = last_checkpoint(self.run_dir / "trainer")
        if ckpt is not None and cfg.max_steps <= done:  # nothing left: load the checkpoint (Trainer would step once)
            self._load(ckpt)
            return done
        start = time.perf_counter()
        self.trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
        self.train_seconds += time.perf_counter() - start
        return self.trainer.state.global_step

    def _load(self, ckpt: Path) -> None:
        """The checkpoint's weights and step count, without training."""
        from transformers import TrainerState

        self.trainer._load_from_checkpoint(str(ckpt))
        self.trainer.state = TrainerState.load_from_json(str(ckpt / "trainer_state.json"))
        self.dashboard.on_train_begin(self.trainer.args, self.trainer.state, self.trainer.control)

    @property
    def rows(self) -> list[dict]:
        return self.dashboard.rows

    def save(self) -> dict[str, str]:
        """``adapter/`` and ``merged/`` in the run folder (the next stage starts from ``merged/``)."""
        from pr1lib.sft import save_run

        if self.trainer is None:
            raise RuntimeError("nothing trained yet: call run() first")
        return save_run(self.trainer, self.tokenizer, self.run_dir, self.model_cfg)

    @property
    def policy(self) -> Any:
        return self.trainer.model if self.trainer is not None else self.model

    def evaluate(self, tiers: Sequence[str] = ("easy", "hard")) -> tuple[dict[str, dict], dict[str, list]]:
        """Greedy held-out metrics of the current policy per TinyGSM tier (and the samples)."""
        return evaluate(self.policy, self.tokenizer, self.cfg, self.model_cfg, self.profile, tiers)


@dataclass
class GRPORun:
    """What ``run_grpo`` made: the JSON-able ``result``, the trained policy and the dashboard rows."""

    result: dict[str, Any]
    run_dir: Path
    model: Any = field(repr=False)
    tokenizer: Any = field(repr=False)
    rows: list[dict] = field(default_factory=list, repr=False)
    samples: dict[str, Any] = field(default_factory=dict, repr=False)


def run_grpo(cfg: GRPOStageConfig, profile: str | None = None, init: str | Path | None = None,
             out: str | Path | None = None, callbacks: Sequence[TrainerCallback] = (), evaluate_tiers=("easy", "hard"),
             before: dict | None = None, dashboard: Any = None, preflight: bool = True) -> GRPORun:
    """Load ``init`` (or the profile's base), check, (evaluate), train to ``cfg.max_steps`` (resuming
    from the run folder's last checkpoint), evaluate, save adapter + merged copy + run card."""
    from pr1lib.doctor import table

    start = time.perf_counter()
    session = GRPOSession(cfg, profile, init, out, callbacks, dashboard=dashboard)
    checks = doctor_checks(session) if preflight else []
    if checks:
        print(table(checks), flush=True)
    samples: dict[str, Any] = {}
    if evaluate_tiers and before is None:
        before, samples["before"] = session.evaluate(evaluate_tiers)
    session.run()
    return finish(session, before, evaluate_tiers, checks, start, samples)


def finish(session: GRPOSession, before: dict | None = None, evaluate_tiers: Sequence[str] = ("easy", "hard"),
           checks: Sequence[Any] = (), start: float | None = None, samples: dict | None = None) -> GRPORun:
    """Evaluate the trained policy, save ``adapter/`` + ``merged/`` and write ``run_card.json``."""
    cfg, samples = session.cfg, dict(samples or {})
    after = None
    if evaluate_tiers:
        after, samples["after"] = session.evaluate(evaluate_tiers)
    paths = session.save()
    rollout = session.trainer.rollout_func
    result = {
        "profile": session.profile, "stage": cfg.stage, "variant": cfg.variant, "reward": cfg.reward,
        "rollout": cfg.rollout_mode, "seed": cfg.seed, "init": str(session.init or session.model_cfg.name),
        "start": start_id(session.init),
        "data": cfg.data or stage_source(cfg.stage, session.profile), "steps": session.step,
        "train_seconds": round(session.train_seconds, 1),
        "rollout_seconds": round(rollout.seconds, 1) if rollout is not None else None,
        "seconds": round(time.perf_counter() - (start or session.started), 1), "threads": torch.get_num_threads(),
        "doctor": {c.name: c.status for c in checks}, "train": train_summary(session.rows),
        "before": before, "after": after, "run_dir": str(session.run_dir), **paths,
    }
    card = {**result, "config": cfg.to_dict(), "model_config": session.model_cfg.to_dict(),
            "environment": environment_report(session.profile, cfg.seed).versions}
    if is_main_process():
        (session.run_dir / "run_card.json").write_text(json.dumps(card, indent=2, default=str))
    return GRPORun(result, session.run_dir, session.policy, session.tokenizer, session.rows, samples)


# ----------------------------------------------------------------------------- pre-flight doctor
def doctor_checks(session: GRPOSession, n: int = 8) -> list:
    """``pr1lib.doctor.doctor`` on the real tokenizer, prompt, batch and reward of a session, with
    gold completions from the rule teacher's parallel traces and one dry-run group per prompt."""
    from pr1lib.doctor import doctor
    from pr1lib.prompts import chat_prompt

    cfg, tok = session.cfg, session.tokenizer
    golds, answers = gold_completions(cfg, session.profile, n)
    golds, answers = (golds or None), (answers or None)
    groups = dry_run_groups(session, n=2)
    reward = reward_funcs(cfg)[0]
    step = cfg.window - 1 if cfg.reward == "alternating" else 0  # a tiered step: gold must reach 1.2
    return doctor(reward, gold_completions=golds, answers=answers,
                  render=lambda p: chat_prompt(p, tok, session.model_cfg.prompt_style), tokenizer=tok,
                  samples=golds, max_completion_length=cfg.max_completion_length,
                  batch=trl_args(cfg, session.run_dir / "trainer", session.model_cfg), groups=groups["groups"],
                  group_answers=groups["answers"], step=step)


def gold_completions(cfg: GRPOStageConfig, profile: str, n: int = 8) -> tuple[list[str], list[str]]:
    """Parallel gold completions of the stage's first ``n`` problems (the rule teacher) and their
    answers; empty for sources without worked solutions (DAPO)."""
    from pr1lib.data import load_source
    from pr1lib.teachers import RuleTeacher

    records = load_source(cfg.data or stage_source(cfg.stage, profile), "train", n, seed=cfg.seed)
    teacher = RuleTeacher(seed=cfg.seed)
    pairs = [(teacher.trace(r)["text"], str(r["answer"])) for r in records]
    pairs = [(text, answer) for text, answer in pairs if "<Parallel>" in text]
    return [t for t, _ in pairs], [a for _, a in pairs]


def dry_run_groups(session: GRPOSession, n: int = 2) -> dict[str, list]:
    """``num_generations`` sampled completions for each of the first ``n`` training prompts."""
    cfg = session.cfg
    rows = session.dataset.select(range(min(n, len(session.dataset))))
    prompts = [p for p in rows["prompt"] for _ in range(cfg.num_generations)]
    if cfg.rollout_mode == "trl":
        return {"groups": None, "answers": None}
    engine = EngineRollout(cfg, session.tokenizer)
    from pr1lib.rollout import generate

    model = session.model
    was_training = model.training
    model.eval()
    try:
        texts = [r.text for r in generate(model, session.tokenizer, prompts, engine.config)]
    finally:
        model.train(was_training)
    groups = [texts[i:i + cfg.num_generations] for i in range(0, len(texts), cfg.num_generations)]
    return {"groups": groups, "answers": list(rows["answer"])}


# ----------------------------------------------------------------------------- curriculum
def curriculum(variant: str, keep_stage2: bool = False) -> tuple[int, ...]:
    """The stages a variant runs: seen SFT -> 2 -> 3; unseen SFT -> 3 (the paper dropped Stage 2,
    §5.6, because it made the unseen model overfit easy problems; ``keep_stage2`` puts it back).

    >>> curriculum("seen"), curriculum("unseen"), curriculum("unseen", keep_stage2=True)
    ((2, 3), (3,), (2, 3))
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    return (2, 3) if variant == "seen" or keep_stage2 else (3,)


def sft_run(variant: str, profile: str) -> Path | None:
    """The variant's SFT run folder: ``runs/sft-<profile>-<variant>`` (the command line), else
    ``runs/03_sft_lora-<profile>/<variant>`` (notebook 03); ``None`` when neither has ``merged/``."""
    root = runs_dir()
    for folder in (root / f"sft-{profile}-{variant}", root / f"03_sft_lora-{profile}" / variant):
        if (folder / "merged").is_dir():
            return folder
    return None


def default_init(stage: int, variant: str, profile: str, seed: int = 0) -> Path | None:
    """Where a stage starts by default: Stage 3 (seen) from the newest Stage 2 run of this seed,
    else the variant's SFT run (``sft_run``), else ``None`` (the base model)."""
    if stage == 3 and variant == "seen":
        found = sorted(runs_dir().glob(f"grpo-{profile}-seen-s2-*-seed{seed}/merged"), key=lambda p: p.stat().st_mtime)
        if found:
            return found[-1].parent
    return sft_run(variant, profile)


def run_curriculum(profile: str | None = None, variant: str = "seen", init: str | Path | None = None,
                   seed: int = 0, out: str | Path | None = None, keep_stage2: bool = False,
                   stage_overrides: dict[int, dict] | None = None, sft_metrics: dict | None = None,
                   **overrides: Any) -> dict[str, Any]:
    """Every stage of ``curriculum(variant)``, each from the previous one's ``merged/``; returns
    ``{"stages": [result, ...], "sft": metrics of the start, "final": metrics of the end}``.
    ``sft_metrics`` reuses an earlier evaluation of ``init`` (the same for every seed)."""
    profile = check_profile(profile)
    init = init if init is not None else default_init(2, variant, profile, seed)
    root = Path(out) if out else runs_dir()
    results, before = [], sft_metrics
    for stage in curriculum(variant, keep_stage2):
        cfg = stage_config(stage, profile, variant=variant, seed=seed,
                           **{**overrides, **(stage_overrides or {}).get(stage, {})})
        out = root / run_name(cfg, profile)
        done = finished_run(out, cfg, init)
        if done is None:
            done = run_grpo(cfg, profile, init, out, before=before, preflight=False).result
        results.append(done)
        init, before = out, done["after"]
    return {"profile": profile, "variant": variant, "seed": seed, "stages": results,
            "sft": results[0]["before"], "final": results[-1]["after"]}


def finished_run(run_dir: Path, cfg: GRPOStageConfig, init: str | Path | None) -> dict | None:
    """The result in ``run_dir/run_card.json`` when that run finished with this config and start
    (a rerun of a curriculum reuses it instead of evaluating it again), else ``None``."""
    path = Path(run_dir) / "run_card.json"
    if not path.is_file() or not (Path(run_dir) / "merged").is_dir():
        return None
    card = json.loads(path.read_text())
    same = card.get("config") == json.loads(json.dumps(cfg.to_dict(), default=str)) and \
        card.get("start") == start_id(init) and card.get("steps") == cfg.max_steps
    if not same:
        return None
    print(f"reusing the finished run {run_dir}", flush=True)
    return {k: v for k, v in card.items() if k not in ("config", "model_config", "environment")}


def sampled_accuracy(run_dir: str | Path, cfg: GRPOStageConfig, profile: str | None = None, tier: str = "hard",
                     k: int = 8) -> dict[str, float]:
    """mean@k, pass@k and the parallel ratio at T = 1 (the paper validates by sampling,
    reference/paper-spec.md) of a run folder's model on the first ``cfg.eval_n`` held-out ``tier``
    problems, in the stage's rollout mode and lengths. Kept in ``run_dir/sampled-<tier>.json`` and
    reused while the model (``start_id``) and the evaluation config are the same."""
    from pr1lib.config import EvalConfig
    from pr1lib.evaluate import run_eval
    from pr1lib.sft import load_run

    profile = check_profile(profile)
    ecfg = EvalConfig.for_profile(profile, benchmark=EVAL_SETS[profile][tier], n=cfg.eval_n, k=k,
                                  mode=cfg.rollout_mode, temperature=1.0, seed=cfg.seed,
                                  max_completion_length=cfg.eval_max_new_tokens, max_path_length=cfg.max_path_length)
    path, key = Path(run_dir) / f"sampled-{tier}.json", {"model": start_id(run_dir), "eval": ecfg.to_dict()}
    key = json.loads(json.dumps(key, default=str))
    cached = json.loads(path.read_text()) if path.is_file() else {}
    if cached.get("key") == key:
        return cached["result"]
    model, tokenizer = load_run(run_dir)
    out = run_eval(model, tokenizer, config=ecfg, progress=False)
    result = {"mean_at_k": out["accuracy"], "pass_at_k": out["pass_at_k"], "parallel_ratio": out["parallel_ratio"],
              "k": k, "n": out["n"]}
    if is_main_process():
        path.write_text(json.dumps({"key": key, "result": result}, indent=2))
    return result


def seeds_summary(runs: Sequence[dict], tier: str = "hard") -> dict[str, Any]:
    """Held-out ``tier`` accuracy of the start (SFT) and the end, per seed, with mean and spread.

    >>> r = [{"sft": {"hard": {"accuracy": 0.1}}, "final": {"hard": {"accuracy": 0.3}}},
    ...      {"sft": {"hard": {"accuracy": 0.1}}, "final": {"hard": {"accuracy": 0.2}}}]
    >>> seeds_summary(r)["final_mean"], seeds_summary(r)["gain_mean"]
    (0.25, 0.15)
    """
    out = {"tier": tier, **_gains([r["sft"][tier]["accuracy"] for r in runs],
                                  [r["final"][tier]["accuracy"] for r in runs]), "n_seeds": len(runs)}
    if all("sampled" in r for r in runs):  # mean@k at T = 1 of the same tier (``sampled_accuracy``)
        out["sampled"] = _gains([r["sampled"]["sft"]["mean_at_k"] for r in runs],
                                [r["sampled"]["final"]["mean_at_k"] for r in runs])
    return out


def _gains(sft: list[float], final: list[float]) -> dict[str, Any]:
    gain = [f - s for s, f in zip(sft, final)]
    spread = (lambda xs: round(statistics.stdev(xs), 4) if len(xs) > 1 else 0.0)  # noqa: E731
    return {"sft": sft, "final": final, "sft_mean": round(statistics.fmean(sft), 4),
            "final_mean": round(statistics.fmean(final), 4), "final_std": spread(final),
            "gain_mean": round(statistics.fmean(gain), 4), "gain_std": spread(gain),
            "improved_seeds": sum(g > 0 for g in gain)}


def unseen_stage2_effect(profile: str | None = None, init: str | Path | None = None, seed: int = 0,
                         out: str | Path | None = None, refresh: bool = False, **overrides: Any) -> dict[str, Any]:
    """The unseen variant from its SFT checkpoint two ways: Stage 3 directly (the paper's recipe)
    and Stage 2 then Stage 3 (the seen recipe kept). The result is cached in
    ``OUT/unseen_stage2.json`` and reused while the start and the overrides are the same."""
    profile = check_profile(profile)
    out = Path(out) if out else runs_dir() / f"grpo-unseen-stage2-{profile}-seed{seed}"
    path = out / "unseen_stage2.json"
    init = init if init is not None else default_init(2, "unseen", profile, seed)
    result: dict[str, Any] = {"init": start_id(init), "overrides": json.loads(json.dumps(overrides, default=str))}
    cached = json.loads(path.read_text()) if path.exists() and not refresh else {}
    if {k: cached.get(k) for k in ("init", "overrides")} == {k: result[k] for k in ("init", "overrides")}:
        return cached
    for name, keep in (("direct", False), ("kept", True)):
        runs = run_curriculum(profile, "unseen", init, seed, out / name, keep_stage2=keep, **overrides)
        result[name] = {"stages": [{k: r[k] for k in ("stage", "reward", "steps", "after", "train")}
                                   for r in runs["stages"]], "sft": runs["sft"], "final": runs["final"]}
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str))
    return result


# ----------------------------------------------------------------------------- reward-mode ablation
ABLATION_MODES = ("accuracy", "alternating", "structure")


def ablation_dir(profile: str, variant: str, seed: int) -> Path:
    return runs_dir() / f"grpo-ablation-{profile}-{variant}-seed{seed}"


def run_ablation(profile: str | None = None, variant: str = "seen", init: str | Path | None = None, seed: int = 0,
                 out: str | Path | None = None, modes: Sequence[str] = ABLATION_MODES, refresh: bool = False,
                 sampled: bool = True, **overrides: Any) -> list[dict]:
    """Stage 3 from one SFT checkpoint, once per reward mode (same seed and steps), as the paper's
    Table 4. A mode whose run folder holds a finished run with this config and start is reused
    (``finished_run``) unless ``refresh``; ``OUT/ablation.json`` keeps the table for ``load_ablation``.
    ``sampled`` adds each model's held-out ratios at T = 1 (``sampled_accuracy``), as the paper measures them."""
    profile = check_profile(profile)
    init = init if init is not None else default_init(2, variant, profile, seed)  # the SFT checkpoint
    out = Path(out) if out else ablation_dir(profile, variant, seed)
    results: dict[str, dict] = {}
    for mode in modes:
        cfg = stage_config(3, profile, reward=mode, variant=variant, seed=seed, **overrides)
        done = None if refresh else finished_run(out / mode, cfg, init)
        if refresh:  # a finished folder would only be re-evaluated: train this mode from scratch
            move_aside(out / mode, "refresh")
        if done is None:
            before = next(iter(results.values()))["before"] if results else None  # the start, evaluated once
            done = run_grpo(cfg, profile, init, out / mode, before=before, preflight=False).result
        if sampled and is_run_folder(init):
            done["sampled"] = {"start": sampled_accuracy(init, cfg, profile), "final": sampled_accuracy(out / mode, cfg, profile)}
        results[mode] = done
        out.mkdir(parents=True, exist_ok=True)
        (out / "ablation.json").write_text(json.dumps({m: {"result": r} for m, r in results.items()},
                                                      indent=2, default=str))
    return list(results.values())


def load_ablation(profile: str | None = None, variant: str = "seen", seed: int = 0,
                  out: str | Path | None = None) -> list[dict]:
    """Cached ablation results (``[]`` when the ablation has not run yet)."""
    path = Path(out or ablation_dir(check_profile(profile), variant, seed)) / "ablation.json"
    return [entry["result"] for entry in json.loads(path.read_text()).values()] if path.exists() else []


def data_tier(data: str) -> str:
    """The held-out tier that matches a training source: ``easy`` for GSM8K-like, else ``hard``.

    >>> data_tier("tinygsm-easy"), data_tier("dapo")
    ('easy', 'hard')
    """
    return "easy" if data in ("gsm8k", "tinygsm-easy") else "hard"


def _pct(share: float) -> float:
    return round(100 * share, 1)


def _sampled_ratios(sampled: dict | None) -> dict[str, float]:
    """The held-out parallel ratio and mean@k at T = 1 of the end and the start, in %, when measured."""
    if not sampled:
        return {}
    return {"sampled_parallel_ratio_%": _pct(sampled["final"]["parallel_ratio"]),
            "start_sampled_parallel_ratio_%": _pct(sampled["start"]["parallel_ratio"]),
            "sampled_accuracy_%": _pct(sampled["final"]["mean_at_k"]),
            "start_sampled_accuracy_%": _pct(sampled["start"]["mean_at_k"])}


def ablation_table(results: Sequence[dict]) -> list[dict[str, Any]]:
    """One row per reward mode: this run's parallel ratio (held-out greedy on the tier it trained
    on, sampled during the last training steps, and held-out sampled when ``run_ablation``
    measured it) and accuracy, next to the paper's Table 4 (Unseen, from Parallel-SFT).

    >>> res = [{"reward": "accuracy", "steps": 5, "data": "tinygsm-hard",
    ...         "before": {"hard": {"parallel_ratio": 0.5, "accuracy": 0.1}},
    ...         "after": {"hard": {"parallel_ratio": 0.25, "accuracy": 0.2}}, "train": {"parallel_ratio": 0.3}}]
    >>> row = ablation_table(res)[0]
    >>> row["parallel_ratio_%"], row["paper_parallel_ratio_%"], row["accuracy_%"]
    (25.0, 13.6, 20.0)
    """
    paper = {row["reward"]: row for row in PAPER_TABLE4}
    rows = []
    for res in results:
        tier = data_tier(res.get("data", "tinygsm-hard"))
        after, start = res["after"][tier], res["before"][tier]
        ref = paper.get(res["reward"], {})
        rows.append({"reward": res["reward"], "data": res.get("data"), "steps": res["steps"],
                     "parallel_ratio_%": _pct(after["parallel_ratio"]),
                     "train_parallel_ratio_%": _pct(res["train"].get("parallel_ratio", float("nan"))),
                     "accuracy_%": _pct(after["accuracy"]),
                     "start_parallel_ratio_%": _pct(start["parallel_ratio"]),
                     "start_accuracy_%": _pct(start["accuracy"]),
                     **_sampled_ratios(res.get("sampled")),
                     "paper_parallel_ratio_%": ref.get("paper_parallel_ratio"), "paper_avg": ref.get("paper_avg")})
    return rows


def ordering_reproduced(rows: Sequence[dict], key: str = "parallel_ratio_%") -> bool | None:
    """Whether accuracy < alternating < structure in ``key`` (the paper's order); ``None`` if a mode
    or its value is missing.

    >>> ordering_reproduced([{"reward": "accuracy", "parallel_ratio_%": 10}, {"reward": "alternating",
    ...     "parallel_ratio_%": 50}, {"reward": "structure", "parallel_ratio_%": 90}])
    True
    """
    by_mode = {r["reward"]: r.get(key) for r in rows}
    if any(by_mode.get(m) is None for m in ABLATION_MODES):
        return None
    return by_mode["accuracy"] < by_mode["alternating"] < by_mode["structure"]


def format_table(rows: Sequence[dict]) -> str:
    """Rows as an aligned text table (what the command prints).

    >>> print(format_table([{"reward": "accuracy", "parallel_ratio_%": 12.5}]))
    reward    parallel_ratio_%
    accuracy  12.5
    """
    if not rows:
        return "(no rows)"
    keys = list(rows[0])
    widths = {k: max(len(k), *(len(str(r.get(k))) for r in rows)) for k in keys}
    lines = ["  ".join(f"{k:<{widths[k]}}" for k in keys).rstrip()]
    lines += ["  ".join(f"{str(r.get(k)):<{widths[k]}}" for k in keys).rstrip() for r in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- command line
def _print_row(row: dict) -> None:
    keys = ("reward", "accuracy", "parallel_ratio", "valid_ratio", "completions/mean_length", "reward_mode/tiered")
    parts = [f"{k.split('/')[-1]}={row[k]:.3g}" for k in keys if row.get(k) is not None]
    print(f"step {row['step']}: " + " ".join(parts), flush=True)


def _overrides(args: Any) -> dict[str, Any]:
    from pr1lib.cli import parse_overrides

    out = parse_overrides(args.overrides)
    for key in ("reward", "variant"):
        if getattr(args, key) is not None:
            out[key] = getattr(args, key)
    if args.steps is not None:
        out["max_steps"] = args.steps
    return out


def _cli_stage(args: Any, profile: str, seed: int) -> dict:
    from pr1lib.dashboard import Dashboard

    cfg = stage_config(args.stage, profile, **{**_overrides(args), "seed": seed})
    init = args.init if args.init is not None else default_init(cfg.stage, cfg.variant, profile, seed)
    if cfg.variant == "unseen" and cfg.stage == 2:
        print("note: the paper skips Stage 2 for the unseen variant (it overfits easy problems, §5.6)")
    print(f"profile={profile} init={init or 'the base model'}\n{cfg}", flush=True)
    out = Path(args.out) if args.out else runs_dir() / run_name(cfg, profile)
    dashboard = Dashboard(out / "metrics.csv", live=False, on_row=_print_row)
    return run_grpo(cfg, profile, init, out, dashboard=dashboard).result


def _cli_ablation(args: Any, profile: str, seed: int) -> dict:
    overrides = {k: v for k, v in _overrides(args).items() if k not in ("reward",)}
    variant = overrides.pop("variant", "seen")
    cached = [] if args.ablation or args.refresh or args.init or overrides else load_ablation(profile, variant,
                                                                                              seed, args.out)
    if cached:  # plain `python -m pr1lib grpo`: show what is there (--ablation reruns what changed)
        print(f"cached results (start: {cached[0]['init']}); pass --ablation to run it again", flush=True)
    results = cached or run_ablation(profile, variant, args.init, seed, args.out, refresh=args.refresh, **overrides)
    rows = ablation_table(results)
    print(format_table(rows), flush=True)
    verdict = {"greedy": ordering_reproduced(rows), "sampled": ordering_reproduced(rows, "sampled_parallel_ratio_%")}
    print(f"paper's order of parallel ratio (accuracy < alternating < structure) reproduced: {verdict}")
    return {"profile": profile, "variant": variant, "seed": seed, "ablation": rows, "ordering_reproduced": verdict}


def _cli(args: Any) -> int:
    from pr1lib.cli import print_json

    profile = check_profile(args.profile)
    seeds = args.seeds or [args.seed if args.seed is not None else 0]
    if args.stage is None or args.ablation:
        results = [_cli_ablation(args, profile, s) for s in seeds]
    elif args.stage == "all":
        overrides = {k: v for k, v in _overrides(args).items() if k != "reward"}
        variant, results = overrides.pop("variant", "seen"), []
        for s in seeds:  # the start is evaluated once: the held-out sets do not depend on the seed
            sft_metrics = results[0]["sft"] if results else None
            run = run_curriculum(profile, variant, args.init, s, args.out and Path(args.out) / f"seed{s}",
                                 sft_metrics=sft_metrics, **overrides)
            if is_run_folder(run["stages"][0]["init"]):  # not the base model
                cfg = stage_config(3, profile, variant=variant, seed=s, **overrides)
                start = results[0]["sampled"]["sft"] if results else sampled_accuracy(run["stages"][0]["init"], cfg, profile)
                run["sampled"] = {"sft": start, "final": sampled_accuracy(run["stages"][-1]["run_dir"], cfg, profile)}
            results.append(run)
            print(json.dumps({"seed": s, **{k: run.get(k) for k in ("sft", "final", "sampled")}}), flush=True)
        if len(results) > 1:
            results = [{"seeds": seeds_summary(results), "runs": results}]
    else:
        args.stage = int(args.stage)
        results = [_cli_stage(args, profile, s) for s in seeds]
    print_json(results[0] if len(results) == 1 else results)
    return 0


def cli_register(sub: Any) -> None:
    """``python -m pr1lib grpo [--stage 2|3|all] [--reward MODE] [--variant seen|unseen] [--init DIR]``."""
    from pr1lib.cli import add_common

    p = sub.add_parser("grpo", help="stages 2-3: GRPO with the paper's rewards; no --stage: the reward ablation",
                       description=__doc__.split("\n\n")[0] + " Without --stage it runs (or prints, when cached) "
                       "the reward-mode ablation: accuracy / alternating / structure from one SFT checkpoint.")
    add_common(p)
    p.add_argument("--stage", choices=("2", "3", "all"), default=None,
                   help="2: easy problems, 3: hard ones, all: the variant's curriculum (seen 2->3, unseen 3)")
    p.add_argument("--reward", choices=REWARD_MODES, default=None, help="reward mode (default: the stage's)")
    p.add_argument("--variant", choices=VARIANTS, default=None, help="seen (causal) or unseen (path-isolating)")
    p.add_argument("--init", default=None, help="start checkpoint: a run folder with merged/ (default: the "
                   "previous stage's run, else runs/sft-<profile>-<variant>, else the base model)")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (default: the config's max_steps)")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="repeat for these seeds")
    p.add_argument("--ablation", action="store_true", help="run (or print the cached) reward-mode ablation")
    p.add_argument("--refresh", action="store_true", help="ablation: ignore cached results")
    p.set_defaults(func=_cli)
