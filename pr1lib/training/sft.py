"""Stage 1, cold-start SFT: TRL's ``SFTTrainer`` on the prompt-completion set, seen or unseen.

The recipe (docs/recipe.md#5-stage-1-cold-start-sft):

* loss on the completion only (TRL's ``completion_only_loss``; TRL appends eos to each completion),
  averaged per sample and then over samples (``loss_reduction="sample"``), as the official trainer
  does with micro-batches of one; ``"token"`` is TRL's token mean over the whole batch;
* LoRA through PEFT on every linear layer, with the six tag rows trainable through
  ``trainable_token_indices`` (a tied LM head follows the embedding), optionally on an NF4 4-bit
  base (QLoRA; bitsandbytes >= 0.45 also runs it on CPU); ``use_lora=False`` is full fine-tuning;
* ``seen`` trains plain causal with TRL's own collator; ``unseen`` swaps in ``ParallelCollator``,
  which adds the path-isolating 4D mask and restarted position ids (``pr1lib.decoding.structure``)
  parsed from the **response only**: the official data set also parsed the tags of the prompt and
  put 47 prompt tokens at position 0 (a bug a public reproduction found). The mask always travels
  with the positions (a restarted position without a mask trips transformers' packed-sequence
  detection).

A run folder holds ``config.json``, ``model_config.json``, ``adapter/`` (LoRA + tag rows),
``merged/`` (a plain model for ``from_pretrained``), ``loss.csv`` and ``run_card.json``.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from torch.nn.utils.rnn import pad_sequence
from transformers import PrinterCallback, TrainerCallback
from trl import SFTConfig, SFTTrainer

from pr1lib.config import PARALLEL_VARIANTS, ModelConfig, SFTStageConfig
from pr1lib.config.runtime import is_main_process, set_threads
from pr1lib.data.sftdata import (  # noqa: F401 - the data steps, also reached as sft.NAME
    build_coldstart,
    load_coldstart,
    rows_widths,
    save_rows,
    sft_rows,
    with_plain_share,
    with_trace_style,
)
from pr1lib.decoding.models import (
    expose_head_bias,
    keep_4bit_differentiable,
    load_training_policy,
    stage_model_config,
    trainable_precision,
)
from pr1lib.decoding.structure import attention_inputs
from pr1lib.evaluation.evaluate import evaluate_stage, held_out_config
from pr1lib.store.paths import runs_dir
from pr1lib.training.runs import Run, save_configs, save_run, start_id, write_rows, write_run_card
from pr1lib.training.sft_live import LossLog
from pr1lib.training.starts import check_sft_start


def data_hash(dataset) -> str:
    """A short SHA-256 of the prompt-completion pairs, in order (goes on the run card).

    >>> from datasets import Dataset
    >>> len(data_hash(Dataset.from_dict({"prompt": ["a"], "completion": ["b"]})))
    16
    """
    digest = hashlib.sha256()
    for row in dataset:
        digest.update(json.dumps([row["prompt"], row["completion"]]).encode())
    return digest.hexdigest()[:16]


# ----------------------------------------------------------------------------- the unseen collator
def response_starts(labels: torch.Tensor) -> torch.Tensor:
    """Index of the first trained token per row: where the response begins (``L`` if none).

    >>> response_starts(torch.tensor([[-100, -100, 5, 6], [-100, -100, -100, -100]])).tolist()
    [2, 4]
    """
    trained = labels != -100  # (B, L)
    first = trained.int().argmax(dim=1)  # (B,) 0 when no token is trained
    return torch.where(trained.any(dim=1), first, labels.shape[1])  # (B,)


@dataclass
class ParallelCollator:
    """Right-pads TRL-prepared rows (``input_ids``, ``labels`` = -100 on the prompt) and adds the
    4D ``attention_mask`` and ``position_ids`` of ``mode``, structure read from the response on."""

    tokenizer: Any
    mode: str = "unseen"
    attn_implementation: str = "sdpa"
    dtype: torch.dtype = torch.float32  # eager's additive mask dtype (the model's compute dtype)
    hide_plan: bool = False  # plans hidden from what follows their block's opening

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        ids = [torch.as_tensor(e["input_ids"]) for e in examples]
        labels = [torch.as_tensor(e.get("labels", e["input_ids"])) for e in examples]
        # (B, L)
        input_ids = pad_sequence(ids, batch_first=True, padding_value=self.tokenizer.pad_token_id)
        labels = pad_sequence(labels, batch_first=True, padding_value=-100)  # (B, L)
        # (B, L)
        real = pad_sequence([torch.ones(len(i), dtype=torch.bool) for i in ids], batch_first=True)
        extra = attention_inputs(
            input_ids,
            self.tokenizer,
            self.mode,
            response_starts(labels),
            self.attn_implementation,
            padding_mask=real,
            dtype=self.dtype,
            hide_plan=self.hide_plan,
        )
        # mask (B, 1, L, L), positions (B, L)
        return {"input_ids": input_ids, "labels": labels, **extra}


# ----------------------------------------------------------------------------- trainer
class LengthBatches(torch.utils.data.Sampler):
    """One epoch's row order: rows shuffled, cut into chunks of 50 batches, sorted by length in
    each chunk and cut into batches, then the full batches shuffled (a short one goes last). A
    batch holds rows of similar length, so little padding, while easy and hard batches stay
    mixed in time (transformers' ``group_by_length`` runs each chunk longest first).

    >>> order = list(LengthBatches([5, 1, 4, 2, 3, 6], batch_size=2))  # lengths of rows 0..5
    >>> sorted(sorted(order[i:i + 2]) for i in (0, 2, 4))  # row pairs of lengths 1-2, 3-4, 5-6
    [[0, 5], [1, 3], [2, 4]]
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int = 0):
        self.lengths, self.batch_size, self.seed, self.epoch = list(lengths), batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:  # called by the Trainer before each epoch
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed * 1000 + self.epoch)
        order, size = torch.randperm(len(self.lengths), generator=g).tolist(), self.batch_size
        batches = []
        for i in range(0, len(order), 50 * size):
            chunk = sorted(order[i : i + 50 * size], key=self.lengths.__getitem__)
            batches += [chunk[j : j + size] for j in range(0, len(chunk), size)]
        full, short = batches[: len(order) // size], batches[len(order) // size :]  # short: 0 or 1
        for k in torch.randperm(len(full), generator=g).tolist():
            yield from full[k]
        for batch in short:
            yield from batch


class ParallelSFTTrainer(SFTTrainer):
    """``SFTTrainer`` whose loss is a per-sample token mean (``"sample"``) or TRL's token mean
    (``"token"``), computed from the fused LM head; works with a 4D mask (never sums it)."""

    loss_is_scaled_for_ga = True  # compute_loss divides by the accumulation steps itself

    def __init__(self, *args: Any, loss_reduction: str = "sample", **kwargs: Any):
        if loss_reduction not in ("sample", "token"):
            raise ValueError(f"loss_reduction must be 'sample' or 'token', got {loss_reduction!r}")
        self.loss_reduction = loss_reduction
        super().__init__(*args, **kwargs)
        expose_head_bias(self.model)

    def _get_train_sampler(self, train_dataset=None):
        """``LengthBatches`` when a batch holds several rows; the default sampler otherwise. Its
        unit is one optimizer step's rows (all processes, all accumulation steps), so how a step
        is split does not change which rows it trains on."""
        data, args = self.train_dataset if train_dataset is None else train_dataset, self.args
        columns = getattr(data, "column_names", ())
        if args.per_device_train_batch_size < 2 or "input_ids" not in columns:
            return super()._get_train_sampler(train_dataset)
        step = args.per_device_train_batch_size * args.world_size * args.gradient_accumulation_steps
        return LengthBatches([len(ids) for ids in data["input_ids"]], step, args.seed)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        out = model(**inputs, use_cache=False, fused_lm_head=True)
        nll, mask = -out.log_probs, out.label_mask.float()  # (B, L-1) each, 0 where label is -100
        steps = self.current_gradient_accumulation_steps if model.training else 1
        if self.loss_reduction == "sample":
            loss = (nll.sum(-1) / mask.sum(-1).clamp(min=1)).mean() / steps
        elif num_items_in_batch is not None and model.training:
            loss = nll.sum() / torch.as_tensor(num_items_in_batch).clamp(min=1)
        else:
            loss = nll.sum() / mask.sum().clamp(min=1)
        metrics = self._metrics["train" if model.training else "eval"]
        metrics["mean_token_accuracy"].append((out.is_top1.sum() / mask.sum().clamp(min=1)).item())
        metrics["num_tokens"].append(mask.sum().item())
        return (loss, out) if return_outputs else loss


def trl_args(cfg: SFTStageConfig, out_dir: str | Path, model_cfg: ModelConfig) -> SFTConfig:
    """TRL's ``SFTConfig`` from the stage config: no packing, no padding-free, completion-only."""
    cuda = torch.cuda.is_available()
    return SFTConfig(
        output_dir=str(out_dir),
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler_type,
        warmup_steps=cfg.warmup_ratio,
        num_train_epochs=cfg.num_train_epochs,
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        max_length=cfg.max_length,
        weight_decay=cfg.weight_decay,
        adam_beta2=cfg.adam_beta2,
        max_grad_norm=cfg.max_grad_norm,
        logging_steps=cfg.logging_steps,
        seed=cfg.seed,
        data_seed=cfg.seed,
        save_strategy="no",
        report_to="none",
        completion_only_loss=True,
        packing=False,
        padding_free=False,
        remove_unused_columns=True,
        activation_checkpointing=model_cfg.gradient_checkpointing,
        bf16=cuda and model_cfg.dtype == "bfloat16",
        fp16=cuda and model_cfg.dtype == "float16",
        use_cpu=not cuda,
        disable_tqdm=True,
    )


def build_trainer(
    cfg: SFTStageConfig,
    model,
    tokenizer,
    peft_config,
    dataset,
    out_dir: str | Path,
    model_cfg: ModelConfig,
    callbacks: Sequence[TrainerCallback] = (),
) -> ParallelSFTTrainer:
    """The trainer for ``cfg.variant``: TRL's collator for ``seen``, ``ParallelCollator`` for
    ``unseen``."""
    if cfg.variant not in PARALLEL_VARIANTS:
        raise ValueError(
            f"variant must be one of {PARALLEL_VARIANTS}, got {cfg.variant!r} "
            "(the plain GRPO baseline has no cold-start SFT)"
        )
    keep_4bit_differentiable(model)
    collator = None
    if cfg.variant == "unseen":
        attn = getattr(model.config, "_attn_implementation", None) or "sdpa"
        dtype = getattr(torch, model_cfg.dtype)
        collator = ParallelCollator(tokenizer, "unseen", attn, dtype, cfg.hide_plan)
    trainer = ParallelSFTTrainer(
        model=model,
        args=trl_args(cfg, out_dir, model_cfg),
        data_collator=collator,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=list(callbacks),
        loss_reduction=cfg.loss_reduction,
    )
    trainable_precision(trainer.model, model_cfg.dtype)  # float16 (a T4): float32 adapters
    return trainer


# ----------------------------------------------------------------------------- one run
def train_timed(trainer, quiet: bool = False) -> tuple[Any, float]:
    """``(TrainOutput, seconds)``; ``quiet`` drops the trainer's printed log lines (notebooks
    plot)."""
    if quiet:
        trainer.remove_callback(PrinterCallback)
    start, cpu = time.perf_counter(), time.process_time()
    out = trainer.train()
    # all threads: shared cores inflate wall time
    out.metrics["train_cpu_seconds"] = time.process_time() - cpu
    return out, time.perf_counter() - start


def run_sft(
    cfg: SFTStageConfig,
    data: str | Path | None = None,
    out: str | Path | None = None,
    evaluate: bool = True,
    callbacks: Sequence[TrainerCallback] = (),
    before: dict | None = None,
    model_cfg: ModelConfig | None = None,
    quiet: bool = False,
) -> Run:
    """Load, (evaluate), train, evaluate, save adapter + merged copy + run card. ``before`` reuses
    an earlier base-model evaluation (the base is the same for seen and unseen); ``model_cfg``
    replaces the profile's model (e.g. a local folder); ``quiet`` drops the printed log lines."""
    start = time.perf_counter()
    set_threads(cfg.num_threads)  # tiny: profiles.TINY_THREADS, smoke: one
    run_dir = Path(out or runs_dir() / f"sft-{cfg.profile}-{cfg.variant}")
    model_cfg = model_cfg or stage_model_config(cfg)
    # another world's start or rows: one line, before the folder
    check_sft_start(cfg.source, None if model_cfg.random_init else model_cfg.name, data)
    run_dir.mkdir(parents=True, exist_ok=True)
    model, tokenizer, peft_config = load_training_policy(model_cfg, cfg.train_tag_rows)
    coldstart = load_coldstart(data, cfg, model_cfg.prompt_style, run_dir)
    shaped = with_trace_style(
        with_plain_share(coldstart, cfg.plain_share, cfg.seed), cfg.trace_style, cfg.path_headers
    )
    rows, dropped = sft_rows(shaped, tokenizer, cfg.max_length)
    if len(rows) == 0:
        raise ValueError(
            f"max_length={cfg.max_length}: all {dropped} cold-start rows are longer (prompt, "
            "completion and eos), so there is nothing to train on: raise --set max_length"
        )
    save_configs(run_dir, cfg, model_cfg)  # what this run does, once its rows are known
    if is_main_process():
        save_rows(rows, run_dir)
    judge = _judge(cfg, model_cfg)
    samples: dict[str, list[dict]] = {}
    if evaluate and before is None:
        before, samples["before"] = evaluate_stage(model, tokenizer, judge)
    log = LossLog()
    trainer = build_trainer(
        cfg, model, tokenizer, peft_config, rows, run_dir / "trainer", model_cfg, [log, *callbacks]
    )
    train_out, train_seconds = train_timed(trainer, quiet)
    after = None
    if evaluate:
        after, samples["after"] = evaluate_stage(trainer.model, tokenizer, judge)
    result = {
        **_run_facts(cfg, model_cfg, trainer, rows, dropped, train_out, train_seconds, start),
        "before": before,
        "after": after,
        "run_dir": str(run_dir),
        **save_run(trainer, tokenizer, run_dir, model_cfg),
    }
    write_run_card(run_dir, result, cfg, model_cfg, loss=log.rows)
    if is_main_process():
        write_rows(log.rows, run_dir / "loss.csv")
    return Run(result, run_dir, trainer.model, tokenizer, log.rows, samples)


def _judge(cfg: SFTStageConfig, model_cfg: ModelConfig):
    """The held-out evaluation before and after: easy problems of the SFT's own world."""
    return held_out_config(
        cfg.profile,
        "easy",
        cfg.eval_n,
        cfg.rollout_mode,
        cfg.eval_max_new_tokens,
        cfg.eval_k,
        cfg.seed,
        model_cfg.prompt_style,
        cfg.source,
        cfg.path_headers,
        {"hide_plan": True} if cfg.hide_plan else None,
    )


def _run_facts(cfg, model_cfg, trainer, rows, dropped, train_out, train_seconds, start) -> dict:
    """What a run card says about the run itself: model, data, steps, loss and time."""
    return {
        "profile": cfg.profile,
        "variant": cfg.variant,
        "model": model_cfg.name,
        "start": start_id(model_cfg.name),  # its name and a hash of its weights
        "load_in_4bit": model_cfg.load_in_4bit,
        "use_lora": model_cfg.use_lora,
        "train_rows": len(rows),
        "row_widths": rows_widths(rows["completion"]),  # the searches its rows hold
        "dropped_too_long": dropped,
        "data_hash": data_hash(rows),
        "steps": trainer.state.global_step,
        "train_loss": train_out.training_loss,
        "train_seconds": round(train_seconds, 1),
        "train_cpu_seconds": round(train_out.metrics["train_cpu_seconds"], 1),
        "seconds": round(time.perf_counter() - start, 1),
        "threads": torch.get_num_threads(),
    }
