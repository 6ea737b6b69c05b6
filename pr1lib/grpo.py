"""Stages 2-3: GRPO with TRL's ``GRPOTrainer``, the paper's rewards and the parallel rollout engine.

The wiring, piece by piece (docs/recipe.md#8-grpo-hyper-parameters):

* **prompts**: a ``Dataset`` with ``prompt`` (the text the model sees) and ``answer`` (the gold
  value, which TRL hands to every reward function as a keyword argument);
* **rewards**: ``pr1lib.rewards.reward_for(cfg.reward)`` wrapped in ``Tracked``, which also logs
  what the dashboard plots (accuracy, parallel ratio, validity, block position, every reward
  mode's score) through TRL's ``log_metric``; extra terms go in with TRL's ``reward_weights``;
* **rollouts**: ``EngineRollout``, a TRL ``rollout_func`` over ``pr1lib.rollout.generate``
  (``forked``: every ``<Parallel>`` opens real independent paths; ``seen``: plain sampling), or
  TRL's own ``model.generate`` (``rollout="trl"``);
* **log-probs**: ``ParallelGRPOTrainer`` overrides the one method all of TRL's log-prob calls go
  through. ``seen`` keeps TRL's causal forward; ``unseen`` adds ``pr1lib.structure``'s isolating 4D
  mask and restarted positions (labels from the 2D mask: the 4D one hides the padding); both run
  each group's prompt once (``buckets.by_prompt``; a small vocabulary: ``buckets.loss_head``);
* **knobs**: ``GRPOStageConfig`` (group 8, clip 0.2 / 0.28 high for the alternating S2 run, no KL,
  T = 1.0) becomes TRL's ``GRPOConfig``, seeds fixed (``seed`` and ``data_seed``);
* **checkpoints**: every ``save_steps`` into ``RUN/trainer/checkpoint-N``; a rerun of the same
  command resumes from the last one (optimizer, scheduler, RNG and data position restored), and a
  ``GRPOSession`` runs N more steps at a time the same way (the control panel's button).

A run folder holds ``config.json``, ``model_config.json``, ``metrics.csv`` (the dashboard's
series), ``trainer/`` (checkpoints), ``adapter/`` and ``merged/`` (the next stage's start) and
``run_card.json``.

>>> run_name(GRPOStageConfig(stage=2, reward="tiered"))
'grpo-tiny-seen-s2-tiered-seed0'
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from datasets import Dataset
from transformers import PrinterCallback, TrainerCallback, TrainerState
from trl import GRPOConfig, GRPOTrainer

from pr1lib.buckets import by_length, by_prompt, loss_head
from pr1lib.config import ROLLOUT_MODES, VARIANTS, GRPOStageConfig, ModelConfig
from pr1lib.dashboard import Dashboard
from pr1lib.data import load_source
from pr1lib.doctor import doctor, table
from pr1lib.evaluate import evaluate_stage, held_out_config
from pr1lib.graders import GRADERS, default_grader
from pr1lib.metrics import Tracked
from pr1lib.models import (
    expose_head_bias,
    keep_4bit_differentiable,
    load_training_policy,
    stage_model_config,
    trainable_precision,
)
from pr1lib.paths import runs_dir
from pr1lib.preflight import dry_run_groups, gold_completions
from pr1lib.prompts import chat_prompt
from pr1lib.rewards import REWARD_MODES, reward_for
from pr1lib.runs import (
    Run,
    claim_run_dir,
    last_checkpoint,
    save_configs,
    save_run,
    start_id,
    write_run_card,
)
from pr1lib.runtime import set_seed, set_threads
from pr1lib.sampling import DynamicSampler, EngineRollout, prefilter
from pr1lib.structure import attention_inputs, attn_implementation

ROLLOUTS = (*ROLLOUT_MODES, "trl")  # the engine's modes, or TRL's own model.generate


# ----------------------------------------------------------------------------- config
def check_config(cfg: GRPOStageConfig) -> None:
    """Refuse unknown modes and batch sizes TRL would reject later, with a message that says why."""
    checks = (
        ("reward", cfg.reward, tuple(REWARD_MODES)),
        ("variant", cfg.variant, VARIANTS),
        ("rollout", cfg.rollout_mode, ROLLOUTS),
        ("grader", grader_of(cfg), tuple(GRADERS)),
    )
    for name, value, allowed in checks:
        if value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    if cfg.per_device_train_batch_size % cfg.num_generations:
        raise ValueError(
            f"per_device_train_batch_size={cfg.per_device_train_batch_size} counts "
            f"completions: it must be a multiple of num_generations="
            f"{cfg.num_generations}"
        )
    if cfg.variant == "unseen" and cfg.rollout_mode != "forked":
        raise ValueError(
            "the unseen variant trains on paths that never saw each other: use rollout='forked'"
        )
    if cfg.dynamic_sampling and cfg.rollout_mode == "trl":
        raise ValueError(
            "dynamic_sampling refills batches through the rollout engine: use rollout=None"
        )
    kept = cfg.prefilter_range
    if len(kept) != 2 or not 0 <= kept[0] <= kept[1] <= 1:
        raise ValueError(
            f"prefilter_range={cfg.prefilter_range} must be two pass rates "
            "(lowest, highest) with 0 <= lowest <= highest <= 1"
        )
    if cfg.prefilter_k and cfg.rollout_mode == "trl":
        raise ValueError(
            "prefilter_k samples the prompts through the rollout engine: use rollout=None"
        )
    if cfg.variant == "plain" and cfg.reward != "accuracy":
        raise ValueError(
            f"the plain variant writes no blocks, so the {cfg.reward} reward would "
            "pay it nothing: use reward='accuracy' (the paper's GRPO baseline)"
        )


def trl_args(cfg: GRPOStageConfig, out_dir: str | Path, model_cfg: ModelConfig) -> GRPOConfig:
    """TRL's ``GRPOConfig`` from the stage config (one generation per optimizer step)."""
    cuda = torch.cuda.is_available()
    return GRPOConfig(
        output_dir=str(out_dir),
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler_type,
        warmup_steps=cfg.warmup_steps,
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm,
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        num_generations=cfg.num_generations,
        max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        epsilon=cfg.epsilon,
        epsilon_high=cfg.clip_high,
        beta=cfg.beta,
        loss_type=cfg.loss_type,
        scale_rewards=cfg.scale_rewards,
        reward_weights=reward_weights(cfg),
        seed=cfg.seed,
        data_seed=cfg.seed,
        save_strategy="steps",
        save_steps=cfg.save_steps,
        save_only_model=False,
        logging_steps=cfg.logging_steps,
        report_to="none",
        disable_tqdm=True,
        use_cpu=not cuda,
        activation_checkpointing=model_cfg.gradient_checkpointing,
        bf16=cuda and model_cfg.dtype == "bfloat16",
        fp16=cuda and model_cfg.dtype == "float16",
        log_completions=False,
        shuffle_dataset=True,
    )


# ----------------------------------------------------------------------------- data
def prompt_dataset(cfg: GRPOStageConfig, tokenizer: Any, prompt_style: str) -> Dataset:
    """``Dataset[prompt, answer, data_source]`` of the stage's training problems (``cfg.source``);
    TRL passes ``data_source`` to the rewards, which the official grader reads."""
    records = load_source(cfg.source, "train", cfg.train_n, seed=cfg.seed)
    return Dataset.from_dict(
        {
            "prompt": [chat_prompt(r["question"], tokenizer, prompt_style) for r in records],
            "answer": [str(r["answer"]) for r in records],
            "data_source": [str(r.get("source", "")) for r in records],
        }
    )


def grader_of(cfg: GRPOStageConfig) -> str:
    """The grader of the stage's rewards: ``cfg.grader``, else ``config.DEFAULT_GRADERS``."""
    return cfg.grader or default_grader(cfg.stage)


# ----------------------------------------------------------------------------- rewards
def reward_funcs(cfg: GRPOStageConfig) -> list[Callable]:
    """The main reward (tracked) followed by the extra terms, in ``reward_weights`` order, all under
    the stage's grader (``grader_of``)."""
    grader = grader_of(cfg)
    main = Tracked(
        reward_for(cfg.reward, cfg.window, cfg.parallel_steps, grader, cfg.tiered_bonus), grader
    )
    return [main, *(reward_for(mode, grader=grader) for mode, _ in cfg.extra_rewards)]


def reward_weights(cfg: GRPOStageConfig) -> list[float]:
    """TRL's ``reward_weights``: the main reward's weight, then each extra term's.

    >>> reward_weights(GRPOStageConfig(extra_rewards=(("structure", 0.2),)))
    [1.0, 0.2]
    """
    return [float(cfg.reward_weight), *(float(w) for _, w in cfg.extra_rewards)]


# ----------------------------------------------------------------------------- the trainer
class ParallelGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose log-prob forward sees the parallel structure when ``variant="unseen"``.

    TRL gets the old, reference and current log-probs from ``_get_per_token_logps_and_entropies``:
    this one override makes them all path-isolated; ``seen`` is TRL's own forward."""

    def __init__(
        self,
        *args: Any,
        variant: str = "seen",
        sampler: DynamicSampler | None = None,
        length_buckets: int = 1,
        share_prompts: bool = False,
        **kwargs: Any,
    ) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        self.variant, self.sampler = variant, sampler
        self.length_buckets, self.share_prompts = length_buckets, share_prompts
        super().__init__(*args, **kwargs)
        expose_head_bias(self.model)  # the same PEFT/TRL shim as the SFT stage

    def _generate_and_score_completions(self, inputs):
        """With a ``sampler``: its signal-dense batch, replayed to TRL as the rollout's output."""
        if self.sampler is None or not self.model.training:
            return super()._generate_and_score_completions(inputs)
        inputs, columns = self.sampler.fill(self, inputs)
        engine, self.rollout_func = self.rollout_func, lambda prompts, trainer: columns
        try:
            return super()._generate_and_score_completions(inputs)
        finally:
            self.rollout_func = engine

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **kwargs,
    ):
        def forward(ids, mask, keep):  # TRL's causal forward (seen, plain) or the unseen one
            if self.variant != "unseen":
                return GRPOTrainer._get_per_token_logps_and_entropies(
                    self, model, ids, mask, keep, batch_size, compute_entropy, **kwargs
                )[:2]
            return self._unseen_logps(model, ids, mask, keep, batch_size, compute_entropy)

        plain = not compute_aux_loss and all(v is None for v in kwargs.values())  # text only
        if plain and self.shares_prompts(model, input_ids.size(1) - logits_to_keep):
            extra = (
                None
                if self.variant != "unseen"
                else self._unseen_inputs(model, input_ids, attention_mask, logits_to_keep)
            )
            with self.accelerator.autocast():
                vocab = self.accelerator.unwrap_model(model).get_output_embeddings().weight.size(0)
                head = loss_head(model, vocab, self.temperature, self._entropy_bonus_enabled)
                lp, ent = by_prompt(
                    head, input_ids, attention_mask, logits_to_keep, self.length_buckets, extra
                )
            return lp, ent if compute_entropy else None, None
        if self.length_buckets > 1 and plain:
            lp, ent = by_length(
                forward, input_ids, attention_mask, logits_to_keep, self.length_buckets
            )
            return lp, ent, None
        if self.variant != "unseen":
            return super()._get_per_token_logps_and_entropies(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size,
                compute_entropy,
                compute_aux_loss,
                **kwargs,
            )
        return (*forward(input_ids, attention_mask, logits_to_keep), None)

    def _unseen_logps(
        self, model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy
    ):
        """Log-probs (and entropies) ``(B, logits_to_keep)`` under the unseen mask, in chunks."""
        batch_size = batch_size or input_ids.size(0)
        logps, entropies = [], []
        for start in range(0, input_ids.size(0), batch_size):
            rows = slice(start, start + batch_size)
            lp, ent = self._unseen_forward(
                model, input_ids[rows], attention_mask[rows], logits_to_keep
            )  # (b, logits_to_keep) each
            logps.append(lp)
            entropies.append(ent)
        return torch.cat(logps), torch.cat(entropies) if compute_entropy else None

    def shares_prompts(self, model: Any, width: int) -> bool:
        """Does the loss run each distinct prompt once (``by_prompt``)? Not under gradient
        checkpointing (no cache) nor flex attention (its mask is no tensor to slice)."""
        bare = self.accelerator.unwrap_model(model)  # DDP hides the config
        flex = attn_implementation(bare) == "flex_attention"
        return (
            self.share_prompts
            and width > 1
            and not flex
            and not getattr(bare, "is_activation_checkpointing", False)
        )

    def _unseen_inputs(self, model, ids: torch.Tensor, mask2d: torch.Tensor, logits_to_keep: int):
        """The unseen 4D ``attention_mask`` and ``position_ids`` of a left-padded TRL batch."""
        bare, width = self.accelerator.unwrap_model(model), ids.size(1) - logits_to_keep
        start = torch.full((len(ids),), width)  # every response starts after the padded prompt
        return attention_inputs(
            ids,
            self.processing_class,
            "unseen",
            start,
            attn_implementation(bare),
            padding_mask=mask2d.bool(),
            dtype=bare.dtype,
        )  # eager's additive mask takes the compute dtype

    def _unseen_forward(self, model, ids: torch.Tensor, mask2d: torch.Tensor, logits_to_keep: int):
        """Log-probs and entropies ``(b, logits_to_keep)`` under the unseen mask and positions."""
        extra = self._unseen_inputs(model, ids, mask2d, logits_to_keep)
        labels = ids.masked_fill(mask2d == 0, -100)  # (b, L) the 2D mask: the 4D one hides padding
        labels[:, :-logits_to_keep] = -100
        with self.accelerator.autocast():
            out = model(input_ids=ids, labels=labels, fused_lm_head=True, **extra)
        return out.log_probs[:, -logits_to_keep:], out.entropy[:, -logits_to_keep:]


def build_trainer(
    cfg: GRPOStageConfig,
    model: Any,
    tokenizer: Any,
    peft_config: Any,
    dataset: Any,
    out_dir: str | Path,
    model_cfg: ModelConfig,
    callbacks: Sequence[TrainerCallback] = (),
    rewards: Sequence[Callable] | None = None,
) -> ParallelGRPOTrainer:
    """The trainer: TRL's generation for ``rollout="trl"``, else ``EngineRollout`` (with a
    ``DynamicSampler`` when ``cfg.dynamic_sampling``)."""
    check_config(cfg)
    keep_4bit_differentiable(model)
    rollout = None if cfg.rollout_mode == "trl" else EngineRollout(cfg, tokenizer)
    sampler = DynamicSampler(cfg.max_refills, cfg.seed) if cfg.dynamic_sampling else None
    trainer = ParallelGRPOTrainer(
        model=model,
        reward_funcs=list(rewards or reward_funcs(cfg)),
        args=trl_args(cfg, out_dir, model_cfg),
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=list(callbacks),
        rollout_func=rollout,
        variant=cfg.variant,
        sampler=sampler,
        length_buckets=cfg.length_buckets,
        share_prompts=cfg.share_prompts,
    )
    # the dashboard (or the CLI's one line per step) reports instead
    trainer.remove_callback(PrinterCallback)
    trainable_precision(trainer.model, model_cfg.dtype)  # float16 (a T4): float32 adapters
    return trainer


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
    """Save a checkpoint on the last step too: the next ``GRPOSession.run`` resumes there."""

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= state.max_steps:
            control.should_save = True
        return control


def train_summary(rows: Sequence[dict], last: int = 10) -> dict[str, float]:
    """Means of the sampled (T = 1) training metrics over the last ``last`` logged steps.

    >>> rows = [{"step": 1, "parallel_ratio": 0.0}, {"step": 2, "parallel_ratio": 0.5}]
    >>> train_summary(rows, last=1)
    {'parallel_ratio': 0.5}
    """
    keys = (
        "reward",
        "accuracy",
        "parallel_ratio",
        "valid_ratio",
        "block_position",
        "completions/mean_length",
    )
    tail = list(rows)[-last:]
    out = {}
    for key in keys:
        values = [r[key] for r in tail if r.get(key) is not None and not math.isnan(r[key])]
        if values:
            out[key] = round(statistics.fmean(values), 4)
    return out


# ----------------------------------------------------------------------------- N steps at a time
def run_name(cfg: GRPOStageConfig) -> str:
    """``grpo-<profile>-<variant>-s<stage>-<reward>-seed<seed>``.

    >>> run_name(GRPOStageConfig(stage=2, reward="tiered"))
    'grpo-tiny-seen-s2-tiered-seed0'
    """
    return f"grpo-{cfg.profile}-{cfg.variant}-s{cfg.stage}-{cfg.reward}-seed{cfg.seed}"


class GRPOSession:
    """One GRPO run folder, trained N steps at a time; every ``run`` resumes from the last
    checkpoint.

    ``run(steps)`` builds a fresh trainer from the current config (so a changed reward mode or
    window applies from the next step on), resumes from ``RUN/trainer/checkpoint-*`` (optimizer,
    scheduler, RNG, data position and step count) and saves a checkpoint when it stops, so two
    runs of 2 steps end with the same weights as one run of 4. After a disconnect, a new session on
    the same folder picks up where the last checkpoint left off.

    ``policy`` is a ready ``(model, tokenizer, peft_config)`` (tests reuse one base model);
    ``rewards`` replaces the config's reward functions (tests use one with guaranteed variance).
    """

    def __init__(
        self,
        cfg: GRPOStageConfig,
        init: str | Path | None = None,
        out: str | Path | None = None,
        callbacks: Sequence[TrainerCallback] = (),
        model_cfg: ModelConfig | None = None,
        dashboard: Any = None,
        policy: tuple | None = None,
        rewards: Sequence[Callable] | None = None,
    ) -> None:
        check_config(cfg)
        self.cfg, self.init = cfg, init
        self.run_dir = Path(out or runs_dir() / run_name(cfg))
        claim_run_dir(self.run_dir, init)
        self.model_cfg = model_cfg or stage_model_config(cfg, init)
        set_threads(cfg.num_threads)
        set_seed(cfg.seed)
        self.model, self.tokenizer, self.peft_config = policy or load_training_policy(
            self.model_cfg, cfg.train_tag_rows
        )
        # None: reward_funcs(cfg), rebuilt at every run (the mode may change)
        self.rewards = rewards
        self.dataset = prompt_dataset(cfg, self.tokenizer, self.model_cfg.prompt_style)
        if cfg.prefilter_k:  # the edge of competence of the start checkpoint (pr1lib.sampling)
            self.dataset = prefilter(self.dataset, self.model, self.tokenizer, cfg, grader_of(cfg))
        self.dashboard = dashboard or Dashboard(self.run_dir / "metrics.csv", live=False)
        self.callbacks = [self.dashboard, *callbacks]
        self.trainer: ParallelGRPOTrainer | None = None
        self.train_seconds, self.started = 0.0, time.perf_counter()

    @property
    def profile(self) -> str:
        return self.cfg.profile

    @property
    def step(self) -> int:
        """Optimizer steps done so far (from the trainer, else the last checkpoint)."""
        if self.trainer is not None:
            return self.trainer.state.global_step
        ckpt = last_checkpoint(self.run_dir / "trainer")
        return int(ckpt.name.split("-")[-1]) if ckpt else 0

    def run(
        self, steps: int | None = None, callbacks: Sequence[TrainerCallback] = (), **changes: Any
    ) -> int:
        """Train ``steps`` more steps (default: up to ``cfg.max_steps``); ``changes`` update the
        config
        first (e.g. ``reward="structure"``). Returns the step reached."""
        self.cfg = self.cfg.replace(**changes) if changes else self.cfg
        done = self.step
        cfg = self.cfg.replace(max_steps=done + steps if steps is not None else self.cfg.max_steps)
        save_configs(self.run_dir, self.cfg, self.model_cfg)
        first = self.trainer is None
        model = self.model if first else self.trainer.model
        self.trainer = build_trainer(
            cfg,
            model,
            self.tokenizer,
            self.peft_config if first else None,
            self.dataset,
            self.run_dir / "trainer",
            self.model_cfg,
            [*self.callbacks, *callbacks, SaveAtEnd()],
            self.rewards,
        )
        ckpt = last_checkpoint(self.run_dir / "trainer")
        # nothing left: load the checkpoint (Trainer would step once)
        if ckpt is not None and cfg.max_steps <= done:
            self._load(ckpt)
            return done
        start = time.perf_counter()
        self.trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
        self.train_seconds += time.perf_counter() - start
        return self.trainer.state.global_step

    def _load(self, ckpt: Path) -> None:
        """The checkpoint's weights and step count, without training."""
        self.trainer._load_from_checkpoint(str(ckpt))
        self.trainer.state = TrainerState.load_from_json(str(ckpt / "trainer_state.json"))
        self.dashboard.on_train_begin(self.trainer.args, self.trainer.state, self.trainer.control)

    @property
    def rows(self) -> list[dict]:
        return self.dashboard.rows

    def save(self) -> dict[str, str]:
        """``adapter/`` and ``merged/`` in the run folder (the next stage starts from
        ``merged/``)."""
        if self.trainer is None:
            raise RuntimeError("nothing trained yet: call run() first")
        return save_run(self.trainer, self.tokenizer, self.run_dir, self.model_cfg)

    @property
    def policy(self) -> Any:
        return self.trainer.model if self.trainer is not None else self.model

    def evaluate(self, tiers: Sequence[str] = ("easy", "hard")) -> tuple[dict[str, dict], dict]:
        """Held-out metrics of the current policy per tier (``evaluate_stage``: mean@k at T = 1
        and greedy beside it, on the profile's held-out sets, in the rollouts' mode)."""
        metrics, samples = {}, {}
        for tier in tiers:
            cfg = self.cfg
            judge = held_out_config(
                self.profile,
                tier,
                cfg.eval_n,
                cfg.eval_rollout_mode,
                cfg.eval_max_new_tokens,
                cfg.eval_k,
                prompt_style=self.model_cfg.prompt_style,
                source=cfg.source,
            )
            metrics[tier], samples[tier] = evaluate_stage(self.policy, self.tokenizer, judge)
        return metrics, samples


def run_grpo(
    cfg: GRPOStageConfig,
    init: str | Path | None = None,
    out: str | Path | None = None,
    callbacks: Sequence[TrainerCallback] = (),
    evaluate_tiers=("easy", "hard"),
    before: dict | None = None,
    dashboard: Any = None,
    preflight: bool = True,
) -> Run:
    """Load ``init`` (or the profile's base), check, (evaluate), train to ``cfg.max_steps``
    (resuming from the run folder's last checkpoint), evaluate, save adapter + merged + run card."""
    start = time.perf_counter()
    session = GRPOSession(cfg, init, out, callbacks, dashboard=dashboard)
    checks = doctor_checks(session) if preflight else []
    if checks:
        print(table(checks), flush=True)
    samples: dict[str, Any] = {}
    if evaluate_tiers and before is None:
        before, samples["before"] = session.evaluate(evaluate_tiers)
    session.run()
    return finish(session, before, evaluate_tiers, checks, start, samples)


def finish(
    session: GRPOSession,
    before: dict | None = None,
    evaluate_tiers: Sequence[str] = ("easy", "hard"),
    checks: Sequence[Any] = (),
    start: float | None = None,
    samples: dict | None = None,
) -> Run:
    """Evaluate the trained policy, save ``adapter/`` + ``merged/`` and write ``run_card.json``."""
    cfg, samples = session.cfg, dict(samples or {})
    after = None
    if evaluate_tiers:
        after, samples["after"] = session.evaluate(evaluate_tiers)
    rollout = session.trainer.rollout_func
    result = {
        "profile": cfg.profile,
        "stage": cfg.stage,
        "variant": cfg.variant,
        "reward": cfg.reward,
        "rollout": cfg.rollout_mode,
        "seed": cfg.seed,
        "init": str(session.init or session.model_cfg.name),
        "start": start_id(session.init),
        "data": cfg.source,
        "steps": session.step,
        "train_seconds": round(session.train_seconds, 1),
        "rollout_seconds": round(rollout.seconds, 1) if rollout is not None else None,
        "seconds": round(time.perf_counter() - (start or session.started), 1),
        "threads": torch.get_num_threads(),
        "doctor": {c.name: c.status for c in checks},
        "train": train_summary(session.rows),
        "before": before,
        "after": after,
        "run_dir": str(session.run_dir),
        **session.save(),
    }
    write_run_card(session.run_dir, result, cfg, session.model_cfg)
    return Run(result, session.run_dir, session.policy, session.tokenizer, session.rows, samples)


# ----------------------------------------------------------------------------- pre-flight doctor
def doctor_checks(session: GRPOSession, n: int = 8) -> list:
    """``pr1lib.doctor.doctor`` on the real tokenizer, prompt, batch and reward of a session, with
    gold completions from the rule teacher's parallel traces and one dry-run group per prompt."""
    cfg, tok = session.cfg, session.tokenizer
    golds, answers = gold_completions(cfg, n)
    golds, answers = (golds or None), (answers or None)
    groups = dry_run_groups(session, n=2)
    reward = reward_funcs(cfg)[0]
    step = cfg.window - 1 if REWARD_MODES[cfg.reward].scheduled else 0  # tiered: gold reaches 1.2
    return doctor(
        reward,
        gold_completions=golds,
        answers=answers,
        render=lambda p: chat_prompt(p, tok, session.model_cfg.prompt_style),
        tokenizer=tok,
        samples=golds,
        max_completion_length=cfg.max_completion_length,
        batch=trl_args(cfg, session.run_dir / "trainer", session.model_cfg),
        groups=groups["groups"],
        group_answers=groups["answers"],
        step=step,
    )
