"""The GRPO trainer and its wiring: TRL's ``GRPOTrainer`` with the parallel log-probs, the
paper's rewards, the rollout engine and ``GRPOConfig`` from a ``GRPOStageConfig``
(``pr1lib.training.grpo`` runs a stage with it; the module docstring there walks through the
pieces).

>>> reward_weights(GRPOStageConfig(extra_rewards=(("structure", 0.5),)))
[1.0, 0.5]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from datasets import Dataset
from transformers import PrinterCallback, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from pr1lib.config import VARIANTS, GRPOStageConfig, ModelConfig
from pr1lib.data.sources import load_source
from pr1lib.decoding.models import (
    expose_head_bias,
    keep_4bit_differentiable,
    trainable_precision,
)
from pr1lib.decoding.structure import attention_inputs, attn_implementation
from pr1lib.evaluation.metrics import Tracked
from pr1lib.format.prompts import chat_prompt
from pr1lib.rewards.graders import GRADERS, default_grader
from pr1lib.rewards.modes import reward_for
from pr1lib.store.disk import check_room, tree_bytes
from pr1lib.training.buckets import by_length, by_prompt, loss_head
from pr1lib.training.completions import DynamicSampler, EngineRollout
from pr1lib.training.runs import last_checkpoint


# ----------------------------------------------------------------------------- config
def check_config(cfg: GRPOStageConfig) -> None:
    """Refuse unknown modes and settings TRL would reject later, with a message that says why
    (``GRPOStageConfig.check``, which the command line runs before anything loads)."""
    if cfg.variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {cfg.variant!r}")
    if grader_of(cfg) not in GRADERS:
        raise ValueError(f"grader must be one of {tuple(GRADERS)}, got {grader_of(cfg)!r}")
    cfg.check()


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
    """``Dataset[prompt, answer, data_source, question]`` of the stage's training problems
    (``cfg.source``); TRL passes ``data_source`` to the rewards, which the official grader reads,
    and ``question``, from which the dashboard reads a world's block shares."""
    records = load_source(cfg.source, "train", cfg.train_n, seed=cfg.seed)
    return Dataset.from_dict(
        {
            "prompt": [chat_prompt(r["question"], tokenizer, prompt_style) for r in records],
            "answer": [str(r["answer"]) for r in records],
            "data_source": [str(r.get("source", "")) for r in records],
            "question": [r["question"] for r in records],
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
        hide_plan: bool = False,
        **kwargs: Any,
    ) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        self.variant, self.sampler = variant, sampler
        self.length_buckets, self.share_prompts = length_buckets, share_prompts
        self.hide_plan = hide_plan  # the unseen mask hides each block's plan (its rollouts' rule)
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
            hide_plan=self.hide_plan,
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
        hide_plan=cfg.hide_plan,
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


class RoomToSave(TrainerCallback):
    """Before a checkpoint is written, refuse one its disk cannot hold
    (``pr1lib.store.disk.DiskFull``: the folder and the bytes, before a byte is written), so the
    last whole checkpoint stays the one a rerun resumes from. Last in the callbacks: it sees every
    request to save."""

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if control.should_save:
            check_room(args.output_dir, checkpoint_bytes(args.output_dir, model))
        return control


def checkpoint_bytes(folder: str | Path, model: Any) -> int:
    """What the next ``checkpoint-N`` in ``folder`` needs: the last one's size, else the trainable
    weights three times over (them and AdamW's two moments) and 4 MB for the rest."""
    last = last_checkpoint(folder)
    if last is not None:
        return tree_bytes(last)
    params = model.parameters() if model is not None else []
    trainable = sum(p.numel() * p.element_size() for p in params if p.requires_grad)
    return 3 * trainable + (4 << 20)


class SaveAtEnd(TrainerCallback):
    """Save a checkpoint on the last step too: the next ``GRPOSession.run`` resumes there."""

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= state.max_steps:
            control.should_save = True
        return control
